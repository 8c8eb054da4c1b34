package controllers_test

import (
	"context"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/builder"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// toggleEnv is an environment deployed by the real engine: kwok (a
// ConfigMap "kwok") and app (a ConfigMap "app") depending on it, from a
// source in the test registry.
func toggleEnv(t *testing.T, ns string, kwok v1alpha1.Component) *v1alpha1.DevEnvironment {
	t.Helper()
	operatortest.UseDeployEngine(ns)
	operatortest.CreateDeployer(t, ns, "deployer")
	operatortest.AppFiles(t, ns, map[string]string{
		"kwok/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: kwok}\n",
		"app/config.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\n",
	})
	kwok.Name = "kwok"
	kwok.Manifests = builder.Component("kwok", builder.Manifests("kwok")).Manifests
	return operatortest.Env(ns, "toggles").ServiceAccount(operatortest.Deployer).AppSource().
		Components(kwok, builder.Component("app", builder.Manifests("app"), builder.DependsOn("kwok"))).Obj()
}

func configMapExists(ns, name string) bool {
	return operatortest.Admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &corev1.ConfigMap{}) == nil
}

// setUp writes the up annotation as `kubectl devloop up`/`down` do.
func setUp(t *testing.T, key client.ObjectKey, value string) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func() error {
		cur := &v1alpha1.DevEnvironment{}
		if err := operatortest.Admin.Get(context.Background(), key, cur); err != nil {
			return err
		}
		patched := cur.DeepCopy()
		if value == "" {
			delete(patched.Annotations, v1alpha1.UpAnnotation)
		} else {
			if patched.Annotations == nil {
				patched.Annotations = map[string]string{}
			}
			patched.Annotations[v1alpha1.UpAnnotation] = value
		}
		return operatortest.Admin.Patch(context.Background(), patched, client.MergeFromWithOptions(cur, client.MergeFromWithOptimisticLock{}))
	}, operatortest.Timeout).Should(Succeed())
}

// TestDisabledComponentBlocksDependentsAndDeploysNothing: enabled: false
// deploys nothing of the component; what depends on it, component or
// suite, is Blocked naming it, and the environment is not left waiting.
func TestDisabledComponentBlocksDependentsAndDeploysNothing(t *testing.T) {
	g := NewWithT(t)
	ns := operatortest.Namespace(t)
	env := toggleEnv(t, ns, v1alpha1.Component{Enabled: ptr.To(false)})
	g.Expect(operatortest.Admin.Create(context.Background(), env)).To(Succeed())
	env = operatortest.WaitForEnv(t, client.ObjectKeyFromObject(env), func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		kwok, app := env.Status.Component("kwok"), env.Status.Component("app")
		g.Expect(kwok).NotTo(BeNil())
		g.Expect(kwok.Phase).To(Equal(v1alpha1.PhaseDisabled))
		g.Expect(kwok.Message).To(Equal("turned off (enabled: false)"))
		g.Expect(app).NotTo(BeNil())
		g.Expect(app.Phase).To(Equal(v1alpha1.PhaseBlocked))
		g.Expect(app.Message).To(Equal("waiting for kwok (Disabled) to be Ready"))
		g.Expect(app.WaitingFor).To(Equal([]string{"kwok"}))
	})
	g.Expect(configMapExists(ns, "kwok")).To(BeFalse())
	g.Expect(configMapExists(ns, "app")).To(BeFalse())
	g.Expect(env.Status.Component("kwok").Inventory).To(BeEmpty())
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)
}

// TestDisablingADeployedComponentRemovesIt: turning a deployed component
// off removes what it deployed, as dropping it from the spec would, and
// turning it on again deploys it again.
func TestDisablingADeployedComponentRemovesIt(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := operatortest.Namespace(t)
	env := toggleEnv(t, ns, v1alpha1.Component{})
	g.Expect(operatortest.Admin.Create(ctx, env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		g.Expect(env.Status.ComponentsReady).To(Equal("2/2"))
	})
	g.Expect(configMapExists(ns, "kwok")).To(BeTrue())

	patch := client.MergeFrom(env.DeepCopy())
	env.Spec.Components[0].Enabled = ptr.To(false)
	g.Expect(operatortest.Admin.Patch(ctx, env, patch)).To(Succeed())
	operatortest.ExpectGone(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kwok"}})
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		g.Expect(env.Status.Component("kwok").Phase).To(Equal(v1alpha1.PhaseDisabled))
		g.Expect(env.Status.Component("kwok").Inventory).To(BeEmpty())
		g.Expect(env.Status.Component("app").Phase).To(Equal(v1alpha1.PhaseBlocked))
	})
	// app's objects stay: it is blocked, not removed.
	g.Expect(configMapExists(ns, "app")).To(BeTrue())

	patch = client.MergeFrom(env.DeepCopy())
	env.Spec.Components[0].Enabled = nil
	g.Expect(operatortest.Admin.Patch(ctx, env, patch)).To(Succeed())
	operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		g.Expect(env.Status.ComponentsReady).To(Equal("2/2"))
	})
	g.Expect(configMapExists(ns, "kwok")).To(BeTrue())
}

// TestOnDemandComponentUpAndDown: an on-demand component is Disabled
// until the up annotation (as `kubectl devloop up` writes it) names it,
// then deployed and left up across reconciles; `down` removes it.
func TestOnDemandComponentUpAndDown(t *testing.T) {
	g := NewWithT(t)
	ns := operatortest.Namespace(t)
	env := toggleEnv(t, ns, v1alpha1.Component{OnDemand: true})
	g.Expect(operatortest.Admin.Create(context.Background(), env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)
	operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		g.Expect(env.Status.Component("kwok").Phase).To(Equal(v1alpha1.PhaseDisabled))
		g.Expect(env.Status.Component("kwok").Message).To(Equal("on demand, not brought up (kubectl devloop up toggles kwok)"))
		g.Expect(env.Status.Component("app").Message).To(Equal("waiting for kwok (Disabled) to be Ready"))
	})
	g.Expect(configMapExists(ns, "kwok")).To(BeFalse())

	setUp(t, key, "kwok")
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		g.Expect(env.Status.ComponentsReady).To(Equal("2/2"))
	})
	g.Expect(configMapExists(ns, "kwok")).To(BeTrue())
	g.Expect(configMapExists(ns, "app")).To(BeTrue())
	// It stays up: another reconcile changes nothing.
	request := operatortest.RequestReconcile(t, env)
	operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.LastHandledReconcileAt).To(Equal(request))
		g.Expect(env.Status.Component("kwok").Phase).To(Equal(v1alpha1.PhaseReady))
	})

	setUp(t, key, "")
	operatortest.ExpectGone(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kwok"}})
	operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		g.Expect(env.Status.Component("kwok").Phase).To(Equal(v1alpha1.PhaseDisabled))
		g.Expect(env.Status.Component("app").Phase).To(Equal(v1alpha1.PhaseBlocked))
	})
}

// TestTriggeredSuiteBringsUpOnDemandComponent: a suite depending on app,
// which depends on the on-demand kwok, is triggered: the operator adds
// kwok to the up annotation, the run waits queued until app is Ready,
// then runs; kwok stays up after.
func TestTriggeredSuiteBringsUpOnDemandComponent(t *testing.T) {
	g := NewWithT(t)
	ns := operatortest.Namespace(t)
	env := toggleEnv(t, ns, v1alpha1.Component{OnDemand: true})
	env.Spec.Tests = []v1alpha1.TestSuite{builder.Suite("e2e").After("app").Obj()}
	g.Expect(operatortest.Admin.Create(context.Background(), env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)
	operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.Component("kwok")).NotTo(BeNil())
		g.Expect(env.Status.Component("kwok").Phase).To(Equal(v1alpha1.PhaseDisabled))
	})
	g.Expect(configMapExists(ns, "kwok")).To(BeFalse())

	operatortest.Annotate(t, env, v1alpha1.TriggerAnnotation, "e2e")
	env, _ = operatortest.ExpectRun(t, env, "e2e", 1, v1alpha1.ResultRunning)
	g.Expect(env.Annotations[v1alpha1.UpAnnotation]).To(Equal("kwok"))
	g.Expect(env.Status.Component("kwok").Phase).To(Equal(v1alpha1.PhaseReady))
	g.Expect(env.Status.Component("app").Phase).To(Equal(v1alpha1.PhaseReady))
	g.Expect(configMapExists(ns, "kwok")).To(BeTrue())
	operatortest.ExpectEvent(t, ns, v1alpha1.ReasonBroughtUp, "bringing up on-demand kwok for the queued run of e2e; they stay up until `kubectl devloop down`")
	job := operatortest.WaitForJob(t, ns, "toggles-e2e-1")
	operatortest.EndTestJob(t, job, 0, "", "ok\n")
	env, _ = operatortest.ExpectRun(t, env, "e2e", 1, v1alpha1.ResultPassed)
	g.Expect(env.Annotations[v1alpha1.UpAnnotation]).To(Equal("kwok"), "stays up until down")
	g.Expect(configMapExists(ns, "kwok")).To(BeTrue())
}

package controllers

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
)

// toggleEnv is an environment deployed by the real engine: kwok (a
// ConfigMap "kwok") and app (a ConfigMap "app") depending on it, from a
// source in the test registry.
func toggleEnv(t *testing.T, ns string, kwok v1alpha1.Component) *v1alpha1.DevEnvironment {
	t.Helper()
	useDeployEngine(ns)
	deployer(t, ns, "deployer", true)
	reg.pushSource(t, ns+"/src", "dev", map[string]string{
		"kwok/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: kwok}\n",
		"app/config.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\n",
	})
	kwok.Name = "kwok"
	kwok.Manifests = &v1alpha1.ManifestsSpec{Source: "app", Paths: []string{"kwok"}}
	return &v1alpha1.DevEnvironment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "toggles"},
		Spec: v1alpha1.DevEnvironmentSpec{
			ServiceAccountName: "deployer",
			Sources: []v1alpha1.Source{{Name: "app", OCI: &v1alpha1.OCISource{
				Repository: reg.host + "/" + ns + "/src", Tag: "dev", Insecure: true}}},
			Components: []v1alpha1.Component{kwok,
				{Name: "app", DependsOn: []string{"kwok"}, Manifests: &v1alpha1.ManifestsSpec{Source: "app", Paths: []string{"app"}}}},
		},
	}
}

func configMapExists(ns, name string) bool {
	return k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &corev1.ConfigMap{}) == nil
}

// setUp writes the up annotation as `kubectl devloop up`/`down` do.
func setUp(t *testing.T, key client.ObjectKey, value string) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func() error {
		cur := &v1alpha1.DevEnvironment{}
		if err := k8s.Get(context.Background(), key, cur); err != nil {
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
		return k8s.Patch(context.Background(), patched, client.MergeFromWithOptions(cur, client.MergeFromWithOptimisticLock{}))
	}, timeout).Should(Succeed())
}

// TestDisabledComponentBlocksDependentsAndDeploysNothing: enabled: false
// deploys nothing of the component; what depends on it, component or
// suite, is Blocked naming it, and the environment is not left waiting.
func TestDisabledComponentBlocksDependentsAndDeploysNothing(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	env := toggleEnv(t, ns, v1alpha1.Component{Enabled: ptr.To(false)})
	g.Expect(k8s.Create(context.Background(), env)).To(Succeed())
	env = eventually(t, client.ObjectKeyFromObject(env), func(g Gomega, env *v1alpha1.DevEnvironment) {
		readyCurrent(g, env)
		kwok, app := componentOf(env, "kwok"), componentOf(env, "app")
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
	g.Expect(componentOf(env, "kwok").Inventory).To(BeEmpty())
	expectKstatus(t, env, status.CurrentStatus)
}

// TestDisablingADeployedComponentRemovesIt: turning a deployed component
// off removes what it deployed, as dropping it from the spec would, and
// turning it on again deploys it again.
func TestDisablingADeployedComponentRemovesIt(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	env := toggleEnv(t, ns, v1alpha1.Component{})
	g.Expect(k8s.Create(ctx, env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)
	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		readyCurrent(g, env)
		g.Expect(env.Status.ComponentsReady).To(Equal("2/2"))
	})
	g.Expect(configMapExists(ns, "kwok")).To(BeTrue())

	patch := client.MergeFrom(env.DeepCopy())
	env.Spec.Components[0].Enabled = ptr.To(false)
	g.Expect(k8s.Patch(ctx, env, patch)).To(Succeed())
	expectGone(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kwok"}})
	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		readyCurrent(g, env)
		g.Expect(componentOf(env, "kwok").Phase).To(Equal(v1alpha1.PhaseDisabled))
		g.Expect(componentOf(env, "kwok").Inventory).To(BeEmpty())
		g.Expect(componentOf(env, "app").Phase).To(Equal(v1alpha1.PhaseBlocked))
	})
	// app's objects stay: it is blocked, not removed.
	g.Expect(configMapExists(ns, "app")).To(BeTrue())

	patch = client.MergeFrom(env.DeepCopy())
	env.Spec.Components[0].Enabled = nil
	g.Expect(k8s.Patch(ctx, env, patch)).To(Succeed())
	eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		readyCurrent(g, env)
		g.Expect(env.Status.ComponentsReady).To(Equal("2/2"))
	})
	g.Expect(configMapExists(ns, "kwok")).To(BeTrue())
}

// TestOnDemandComponentUpAndDown: an on-demand component is Disabled
// until the up annotation (as `kubectl devloop up` writes it) names it,
// then deployed and left up across reconciles; `down` removes it.
func TestOnDemandComponentUpAndDown(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	env := toggleEnv(t, ns, v1alpha1.Component{OnDemand: true})
	g.Expect(k8s.Create(context.Background(), env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)
	eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		readyCurrent(g, env)
		g.Expect(componentOf(env, "kwok").Phase).To(Equal(v1alpha1.PhaseDisabled))
		g.Expect(componentOf(env, "kwok").Message).To(Equal("on demand, not brought up (kubectl devloop up toggles kwok)"))
		g.Expect(componentOf(env, "app").Message).To(Equal("waiting for kwok (Disabled) to be Ready"))
	})
	g.Expect(configMapExists(ns, "kwok")).To(BeFalse())

	setUp(t, key, "kwok")
	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		readyCurrent(g, env)
		g.Expect(env.Status.ComponentsReady).To(Equal("2/2"))
	})
	g.Expect(configMapExists(ns, "kwok")).To(BeTrue())
	g.Expect(configMapExists(ns, "app")).To(BeTrue())
	// It stays up: another reconcile changes nothing.
	request := requestReconcile(t, env)
	eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.LastHandledReconcileAt).To(Equal(request))
		g.Expect(componentOf(env, "kwok").Phase).To(Equal(v1alpha1.PhaseReady))
	})

	setUp(t, key, "")
	expectGone(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kwok"}})
	eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		readyCurrent(g, env)
		g.Expect(componentOf(env, "kwok").Phase).To(Equal(v1alpha1.PhaseDisabled))
		g.Expect(componentOf(env, "app").Phase).To(Equal(v1alpha1.PhaseBlocked))
	})
}

// TestTriggeredSuiteBringsUpOnDemandComponent: a suite depending on app,
// which depends on the on-demand kwok, is triggered: the operator adds
// kwok to the up annotation, the run waits queued until app is Ready,
// then runs; kwok stays up after.
func TestTriggeredSuiteBringsUpOnDemandComponent(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	env := toggleEnv(t, ns, v1alpha1.Component{OnDemand: true})
	e2e := suite("e2e")
	e2e.DependsOn = []string{"app"}
	env.Spec.Tests = []v1alpha1.TestSuite{e2e}
	g.Expect(k8s.Create(context.Background(), env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)
	eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(componentOf(env, "kwok")).NotTo(BeNil())
		g.Expect(componentOf(env, "kwok").Phase).To(Equal(v1alpha1.PhaseDisabled))
	})
	g.Expect(configMapExists(ns, "kwok")).To(BeFalse())

	annotate(t, env, v1alpha1.TriggerAnnotation, "e2e")
	env, _ = expectRun(t, env, "e2e", 1, v1alpha1.ResultRunning)
	g.Expect(env.Annotations[v1alpha1.UpAnnotation]).To(Equal("kwok"))
	g.Expect(componentOf(env, "kwok").Phase).To(Equal(v1alpha1.PhaseReady))
	g.Expect(componentOf(env, "app").Phase).To(Equal(v1alpha1.PhaseReady))
	g.Expect(configMapExists(ns, "kwok")).To(BeTrue())
	expectEvent(t, ns, v1alpha1.ReasonBroughtUp, "bringing up on-demand kwok for the queued run of e2e; they stay up until `kubectl devloop down`")
	job := getJob(t, ns, "toggles-e2e-1")
	endTestJob(t, job, 0, "", "ok\n")
	env, _ = expectRun(t, env, "e2e", 1, v1alpha1.ResultPassed)
	g.Expect(env.Annotations[v1alpha1.UpAnnotation]).To(Equal("kwok"), "stays up until down")
	g.Expect(configMapExists(ns, "kwok")).To(BeTrue())
}

package controllers

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
)

const timeout = 20 * time.Second

func component(name string, dependsOn ...string) v1alpha1.Component {
	return v1alpha1.Component{Name: name, DependsOn: dependsOn, Manifests: &v1alpha1.ManifestsSpec{Source: "src"}}
}

func newEnv(ns, name string, components ...v1alpha1.Component) *v1alpha1.DevEnvironment {
	return &v1alpha1.DevEnvironment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.DevEnvironmentSpec{
			Sources:    []v1alpha1.Source{{Name: "src", OCI: &v1alpha1.OCISource{Repository: reg.host + "/team/src", Tag: "latest", Insecure: true}}},
			Components: components,
		},
	}
}

// eventually polls the environment until check passes.
func eventually(t testing.TB, key types.NamespacedName, check func(g Gomega, env *v1alpha1.DevEnvironment)) *v1alpha1.DevEnvironment {
	t.Helper()
	env := &v1alpha1.DevEnvironment{}
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), key, env)).To(Succeed())
		check(g, env)
	}, timeout, 100*time.Millisecond).Should(Succeed())
	return env
}

// expectKstatus is the conformance check every reconciler test ends with:
// kstatus, as Flux computes it, must read the environment as want.
func expectKstatus(t *testing.T, env *v1alpha1.DevEnvironment, want status.Status) {
	t.Helper()
	res, err := testenv.Kstatus(env)
	g := NewWithT(t)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Status).To(Equal(want), "kstatus message: %s", res.Message)
}

func condition(env *v1alpha1.DevEnvironment, typ string) *metav1.Condition {
	return meta.FindStatusCondition(env.Status.Conditions, typ)
}

func readyCurrent(g Gomega, env *v1alpha1.DevEnvironment) {
	g.Expect(env.Status.ObservedGeneration).To(Equal(env.Generation))
	ready := condition(env, v1alpha1.ConditionReady)
	g.Expect(ready).NotTo(BeNil())
	g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), "Ready: %s", ready.Message)
}

func TestEmptyEnvironmentBecomesReady(t *testing.T) {
	ns := newNamespace(t)
	env := &v1alpha1.DevEnvironment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "empty"}}
	NewWithT(t).Expect(k8s.Create(context.Background(), env)).To(Succeed())

	env = eventually(t, client.ObjectKeyFromObject(env), func(g Gomega, env *v1alpha1.DevEnvironment) {
		readyCurrent(g, env)
		g.Expect(env.Finalizers).To(ContainElement(v1alpha1.Finalizer))
		g.Expect(condition(env, v1alpha1.ConditionStalled)).To(BeNil())
		g.Expect(condition(env, v1alpha1.ConditionReconciling)).To(BeNil())
		g.Expect(env.Status.ComponentsReady).To(Equal("0/0"))
	})
	expectKstatus(t, env, status.CurrentStatus)
}

func TestDependencyCycleStallsUntilFixed(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	env := newEnv(ns, "cyclic", component("crds", "webhook"), component("operator", "crds"), component("webhook", "operator"))
	g.Expect(k8s.Create(context.Background(), env)).To(Succeed(), "CEL cannot see a cycle, so the API server accepts it")
	key := client.ObjectKeyFromObject(env)

	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.ObservedGeneration).To(Equal(env.Generation))
		stalled := condition(env, v1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(stalled.Reason).To(Equal(v1alpha1.ReasonDependencyCycle))
		g.Expect(stalled.Message).To(ContainSubstring("crds -> webhook -> operator -> crds"))
		ready := condition(env, v1alpha1.ConditionReady)
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Message).To(ContainSubstring("spec.components: dependency cycle: crds -> webhook -> operator -> crds"))
		g.Expect(condition(env, v1alpha1.ConditionReconciling)).To(BeNil(), "never Reconciling and Stalled at once")
	})
	expectKstatus(t, env, status.FailedStatus)
	g.Expect(scripted.calls(ns, "crds")).To(BeZero(), "nothing is deployed from a spec that does not plan")

	// The Warning event names the cycle too, where `kubectl describe` and
	// `kubectl events` show it.
	g.Eventually(func(g Gomega) {
		events := &eventsv1.EventList{}
		g.Expect(k8s.List(context.Background(), events, client.InNamespace(ns))).To(Succeed())
		var found bool
		for _, e := range events.Items {
			found = found || (e.Regarding.Name == "cyclic" && e.Type == "Warning" && e.Reason == v1alpha1.ReasonDependencyCycle &&
				e.Note == "spec.components: dependency cycle: crds -> webhook -> operator -> crds")
		}
		g.Expect(found).To(BeTrue(), "events: %v", events.Items)
	}, timeout).Should(Succeed())

	// Fix the spec: the environment becomes Ready with nothing left over.
	patch := client.MergeFrom(env.DeepCopy())
	env.Spec.Components[0].DependsOn = nil
	g.Expect(k8s.Patch(context.Background(), env, patch)).To(Succeed())
	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		readyCurrent(g, env)
		g.Expect(condition(env, v1alpha1.ConditionStalled)).To(BeNil())
		g.Expect(env.Status.ComponentsReady).To(Equal("3/3"))
	})
	expectKstatus(t, env, status.CurrentStatus)
}

func TestDependentsWaitOnEveryChange(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	scripted.set(ns, "db", v1alpha1.PhaseDeploying, nil)
	env := newEnv(ns, "gated", component("app", "db", "crds"), component("db"), component("crds"))
	g.Expect(k8s.Create(context.Background(), env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)

	blocked := func(g Gomega, env *v1alpha1.DevEnvironment) {
		app := findComponent(env, "app")
		g.Expect(app).NotTo(BeNil())
		g.Expect(app.Phase).To(Equal(v1alpha1.PhaseBlocked))
		g.Expect(app.WaitingFor).To(Equal([]string{"db"}))
		g.Expect(app.Message).To(Equal("waiting for db to be Ready"))
		g.Expect(condition(env, v1alpha1.ConditionReconciling)).NotTo(BeNil())
		g.Expect(condition(env, v1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionFalse))
	}
	env = eventually(t, key, blocked)
	g.Expect(phaseOf(env, "crds")).To(Equal(v1alpha1.PhaseReady))
	g.Expect(env.Status.ComponentsReady).To(Equal("1/3"))
	g.Expect(scripted.calls(ns, "app")).To(BeZero(), "a blocked component is never handed to the engine")
	expectKstatus(t, env, status.InProgressStatus)

	scripted.set(ns, "db", v1alpha1.PhaseReady, nil)
	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		readyCurrent(g, env)
		g.Expect(phaseOf(env, "app")).To(Equal(v1alpha1.PhaseReady))
	})
	expectKstatus(t, env, status.CurrentStatus)

	// db rolls out again (a rebuild, say): app is blocked again until db is
	// Ready again — gating holds on every change, not only the first.
	scripted.set(ns, "db", v1alpha1.PhaseDeploying, nil)
	patch := client.MergeFrom(env.DeepCopy())
	env.Annotations = map[string]string{v1alpha1.ReconcileRequestAnnotation: "1"}
	g.Expect(k8s.Patch(context.Background(), env, patch)).To(Succeed())
	env = eventually(t, key, blocked)
	expectKstatus(t, env, status.InProgressStatus)
	scripted.set(ns, "db", v1alpha1.PhaseReady, nil)
	env = eventually(t, key, readyCurrent)
	expectKstatus(t, env, status.CurrentStatus)
}

func TestEngineErrorIsRetried(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	scripted.set(ns, "api", "", errors.New("registry unreachable"))
	env := newEnv(ns, "flaky", component("api"))
	g.Expect(k8s.Create(context.Background(), env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)

	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(phaseOf(env, "api")).To(Equal(v1alpha1.PhaseFailed))
		ready := condition(env, v1alpha1.ConditionReady)
		g.Expect(ready.Reason).To(Equal(v1alpha1.ReasonReconcileError))
		g.Expect(ready.Message).To(Equal("component api: registry unreachable"))
		g.Expect(condition(env, v1alpha1.ConditionReconciling).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(condition(env, v1alpha1.ConditionStalled)).To(BeNil(), "a transient error is not terminal")
	})
	expectKstatus(t, env, status.InProgressStatus)

	// The failure heals without a spec change: backoff retries find the
	// engine working again.
	scripted.set(ns, "api", v1alpha1.PhaseReady, nil)
	env = eventually(t, key, readyCurrent)
	expectKstatus(t, env, status.CurrentStatus)
}

func TestSuspendedEnvironmentDoesNothing(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	env := newEnv(ns, "paused", component("api"))
	env.Spec.Suspend = true
	g.Expect(k8s.Create(context.Background(), env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)

	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		ready := condition(env, v1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil(), "Ready is always present")
		g.Expect(ready.Reason).To(Equal(v1alpha1.ReasonSuspended))
		g.Expect(env.Status.ObservedGeneration).To(Equal(env.Generation))
	})
	g.Expect(scripted.calls(ns, "api")).To(BeZero())
	expectKstatus(t, env, status.InProgressStatus) // never reconciled: Ready is Unknown

	patch := client.MergeFrom(env.DeepCopy())
	env.Spec.Suspend = false
	g.Expect(k8s.Patch(context.Background(), env, patch)).To(Succeed())
	env = eventually(t, key, readyCurrent)
	g.Expect(scripted.calls(ns, "api")).To(BeNumerically(">", 0))
	expectKstatus(t, env, status.CurrentStatus)
}

func TestDeletionFinalizesInReverseOrder(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	env := newEnv(ns, "doomed", component("operator", "crds"), component("tests-tooling", "operator"), component("crds"))
	env.Spec.Tests = []v1alpha1.TestSuite{{Name: "smoke", Image: v1alpha1.TestImage{Ref: "busybox"}, Command: []string{"true"}, DependsOn: []string{"operator"}}}
	g.Expect(k8s.Create(context.Background(), env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)
	env = eventually(t, key, readyCurrent)
	g.Expect(env.Status.Tests).To(HaveLen(1), "every suite is listed in status")
	g.Expect(env.Status.Tests[0].Name).To(Equal("smoke"))
	expectKstatus(t, env, status.CurrentStatus)

	g.Expect(k8s.Delete(context.Background(), env)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(context.Background(), key, &v1alpha1.DevEnvironment{}))
	}, timeout).Should(BeTrue())
	g.Expect(scripted.finalizedIn(ns)).To(Equal([]string{"tests-tooling", "operator", "crds"}))
}

func TestCrossNamespaceSourceRefused(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	env := newEnv(ns, "borrower", component("api"))
	env.Spec.Sources = append(env.Spec.Sources, v1alpha1.Source{Name: "flux", SourceRef: &v1alpha1.FluxSourceReference{Kind: "GitRepository", Name: "app", Namespace: "flux-system"}})
	g.Expect(k8s.Create(context.Background(), env)).To(Succeed())

	env = eventually(t, client.ObjectKeyFromObject(env), func(g Gomega, env *v1alpha1.DevEnvironment) {
		stalled := condition(env, v1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Reason).To(Equal(v1alpha1.ReasonInvalidSpec))
		g.Expect(stalled.Message).To(ContainSubstring("spec.sources[1].sourceRef.namespace"))
		g.Expect(stalled.Message).To(ContainSubstring("--no-cross-namespace-refs"))
	})
	expectKstatus(t, env, status.FailedStatus)
}

// phaseOf is the component's phase, or "" before it has a status entry.
func phaseOf(env *v1alpha1.DevEnvironment, name string) v1alpha1.ComponentPhase {
	if c := findComponent(env, name); c != nil {
		return c.Phase
	}
	return ""
}

func findComponent(env *v1alpha1.DevEnvironment, name string) *v1alpha1.ComponentStatus {
	return env.Status.Component(name)
}

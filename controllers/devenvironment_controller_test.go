package controllers_test

import (
	"context"
	"errors"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/operatortest"
)

func TestEmptyEnvironmentBecomesReady(t *testing.T) {
	ns := operatortest.Namespace(t)
	env := operatortest.Env(ns, "empty").Obj()
	NewWithT(t).Expect(operatortest.Admin.Create(context.Background(), env)).To(Succeed())

	env = operatortest.WaitForEnv(t, client.ObjectKeyFromObject(env), func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		g.Expect(env.Finalizers).To(ContainElement(v1alpha1.Finalizer))
		g.Expect(operatortest.EnvCondition(env, v1alpha1.ConditionStalled)).To(BeNil())
		g.Expect(operatortest.EnvCondition(env, v1alpha1.ConditionReconciling)).To(BeNil())
		g.Expect(env.Status.ComponentsReady).To(Equal("0/0"))
	})
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)
}

func TestDependencyCycleStallsUntilFixed(t *testing.T) {
	g := NewWithT(t)
	ns := operatortest.Namespace(t)
	env := operatortest.Env(ns, "cyclic").Source(operatortest.SharedOCISource()).Components(operatortest.ScriptedComponent("crds", "webhook"), operatortest.ScriptedComponent("operator", "crds"), operatortest.ScriptedComponent("webhook", "operator")).Obj()
	g.Expect(operatortest.Admin.Create(context.Background(), env)).To(Succeed(), "CEL cannot see a cycle, so the API server accepts it")
	key := client.ObjectKeyFromObject(env)

	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.ObservedGeneration).To(Equal(env.Generation))
		stalled := operatortest.EnvCondition(env, v1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(stalled.Reason).To(Equal(v1alpha1.ReasonDependencyCycle))
		g.Expect(stalled.Message).To(ContainSubstring("crds -> webhook -> operator -> crds"))
		ready := operatortest.EnvCondition(env, v1alpha1.ConditionReady)
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Message).To(ContainSubstring("spec.components: dependency cycle: crds -> webhook -> operator -> crds"))
		g.Expect(operatortest.EnvCondition(env, v1alpha1.ConditionReconciling)).To(BeNil(), "never Reconciling and Stalled at once")
	})
	operatortest.ExpectKstatus(t, env, status.FailedStatus)
	g.Expect(operatortest.ScriptedDeploy.Calls(ns, "crds")).To(BeZero(), "nothing is deployed from a spec that does not plan")

	// The Warning event names the cycle too, where `kubectl describe` and
	// `kubectl events` show it.
	g.Eventually(func(g Gomega) {
		events := &eventsv1.EventList{}
		g.Expect(operatortest.Admin.List(context.Background(), events, client.InNamespace(ns))).To(Succeed())
		var found bool
		for _, e := range events.Items {
			found = found || (e.Regarding.Name == "cyclic" && e.Type == "Warning" && e.Reason == v1alpha1.ReasonDependencyCycle &&
				e.Note == "spec.components: dependency cycle: crds -> webhook -> operator -> crds")
		}
		g.Expect(found).To(BeTrue(), "events: %v", events.Items)
	}, operatortest.Timeout).Should(Succeed())

	// Fix the spec: the environment becomes Ready with nothing left over.
	patch := client.MergeFrom(env.DeepCopy())
	env.Spec.Components[0].DependsOn = nil
	g.Expect(operatortest.Admin.Patch(context.Background(), env, patch)).To(Succeed())
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		g.Expect(operatortest.EnvCondition(env, v1alpha1.ConditionStalled)).To(BeNil())
		g.Expect(env.Status.ComponentsReady).To(Equal("3/3"))
	})
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)
}

func TestDependentsWaitOnEveryChange(t *testing.T) {
	g := NewWithT(t)
	ns := operatortest.Namespace(t)
	operatortest.ScriptedDeploy.Set(ns, "db", v1alpha1.PhaseDeploying, nil)
	env := operatortest.Env(ns, "gated").Source(operatortest.SharedOCISource()).Components(operatortest.ScriptedComponent("app", "db", "crds"), operatortest.ScriptedComponent("db"), operatortest.ScriptedComponent("crds")).Obj()
	g.Expect(operatortest.Admin.Create(context.Background(), env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)

	blocked := func(g Gomega, env *v1alpha1.DevEnvironment) {
		app := env.Status.Component("app")
		g.Expect(app).NotTo(BeNil())
		g.Expect(app.Phase).To(Equal(v1alpha1.PhaseBlocked))
		g.Expect(app.WaitingFor).To(Equal([]string{"db"}))
		g.Expect(app.Message).To(Equal("waiting for db to be Ready"))
		g.Expect(operatortest.EnvCondition(env, v1alpha1.ConditionReconciling)).NotTo(BeNil())
		g.Expect(operatortest.EnvCondition(env, v1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionFalse))
	}
	env = operatortest.WaitForEnv(t, key, blocked)
	g.Expect(operatortest.PhaseOf(env, "crds")).To(Equal(v1alpha1.PhaseReady))
	g.Expect(env.Status.ComponentsReady).To(Equal("1/3"))
	g.Expect(operatortest.ScriptedDeploy.Calls(ns, "app")).To(BeZero(), "a blocked component is never handed to the engine")
	operatortest.ExpectKstatus(t, env, status.InProgressStatus)

	operatortest.ScriptedDeploy.Set(ns, "db", v1alpha1.PhaseReady, nil)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		g.Expect(operatortest.PhaseOf(env, "app")).To(Equal(v1alpha1.PhaseReady))
	})
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)

	// db rolls out again (a rebuild, say): app is blocked again until db is
	// Ready again — gating holds on every change, not only the first.
	operatortest.ScriptedDeploy.Set(ns, "db", v1alpha1.PhaseDeploying, nil)
	patch := client.MergeFrom(env.DeepCopy())
	env.Annotations = map[string]string{v1alpha1.ReconcileRequestAnnotation: "1"}
	g.Expect(operatortest.Admin.Patch(context.Background(), env, patch)).To(Succeed())
	env = operatortest.WaitForEnv(t, key, blocked)
	operatortest.ExpectKstatus(t, env, status.InProgressStatus)
	operatortest.ScriptedDeploy.Set(ns, "db", v1alpha1.PhaseReady, nil)
	env = operatortest.WaitForEnv(t, key, operatortest.ExpectReadyAndCurrent)
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)
}

func TestEngineErrorIsRetried(t *testing.T) {
	g := NewWithT(t)
	ns := operatortest.Namespace(t)
	operatortest.ScriptedDeploy.Set(ns, "api", "", errors.New("registry unreachable"))
	env := operatortest.Env(ns, "flaky").Source(operatortest.SharedOCISource()).Components(operatortest.ScriptedComponent("api")).Obj()
	g.Expect(operatortest.Admin.Create(context.Background(), env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)

	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(operatortest.PhaseOf(env, "api")).To(Equal(v1alpha1.PhaseFailed))
		ready := operatortest.EnvCondition(env, v1alpha1.ConditionReady)
		g.Expect(ready.Reason).To(Equal(v1alpha1.ReasonReconcileError))
		g.Expect(ready.Message).To(Equal("component api: registry unreachable"))
		g.Expect(operatortest.EnvCondition(env, v1alpha1.ConditionReconciling).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(operatortest.EnvCondition(env, v1alpha1.ConditionStalled)).To(BeNil(), "a transient error is not terminal")
	})
	operatortest.ExpectKstatus(t, env, status.InProgressStatus)

	// The failure heals without a spec change: backoff retries find the
	// engine working again.
	operatortest.ScriptedDeploy.Set(ns, "api", v1alpha1.PhaseReady, nil)
	env = operatortest.WaitForEnv(t, key, operatortest.ExpectReadyAndCurrent)
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)
}

func TestSuspendedEnvironmentDoesNothing(t *testing.T) {
	g := NewWithT(t)
	ns := operatortest.Namespace(t)
	env := operatortest.Env(ns, "paused").Source(operatortest.SharedOCISource()).Components(operatortest.ScriptedComponent("api")).Obj()
	env.Spec.Suspend = true
	g.Expect(operatortest.Admin.Create(context.Background(), env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)

	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		ready := operatortest.EnvCondition(env, v1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil(), "Ready is always present")
		g.Expect(ready.Reason).To(Equal(v1alpha1.ReasonSuspended))
		g.Expect(env.Status.ObservedGeneration).To(Equal(env.Generation))
	})
	g.Expect(operatortest.ScriptedDeploy.Calls(ns, "api")).To(BeZero())
	operatortest.ExpectKstatus(t, env, status.InProgressStatus) // never reconciled: Ready is Unknown

	patch := client.MergeFrom(env.DeepCopy())
	env.Spec.Suspend = false
	g.Expect(operatortest.Admin.Patch(context.Background(), env, patch)).To(Succeed())
	env = operatortest.WaitForEnv(t, key, operatortest.ExpectReadyAndCurrent)
	g.Expect(operatortest.ScriptedDeploy.Calls(ns, "api")).To(BeNumerically(">", 0))
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)
}

func TestDeletionFinalizesInReverseOrder(t *testing.T) {
	g := NewWithT(t)
	ns := operatortest.Namespace(t)
	env := operatortest.Env(ns, "doomed").Source(operatortest.SharedOCISource()).Components(operatortest.ScriptedComponent("operator", "crds"), operatortest.ScriptedComponent("tests-tooling", "operator"), operatortest.ScriptedComponent("crds")).Obj()
	env.Spec.Tests = []v1alpha1.TestSuite{{Name: "smoke", Image: v1alpha1.TestImage{Ref: "busybox"}, Command: []string{"true"}, DependsOn: []string{"operator"}}}
	g.Expect(operatortest.Admin.Create(context.Background(), env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)
	env = operatortest.WaitForEnv(t, key, operatortest.ExpectReadyAndCurrent)
	g.Expect(env.Status.Tests).To(HaveLen(1), "every suite is listed in status")
	g.Expect(env.Status.Tests[0].Name).To(Equal("smoke"))
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)

	g.Expect(operatortest.Admin.Delete(context.Background(), env)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(operatortest.Admin.Get(context.Background(), key, &v1alpha1.DevEnvironment{}))
	}, operatortest.Timeout).Should(BeTrue())
	g.Expect(operatortest.ScriptedDeploy.FinalizedIn(ns)).To(Equal([]string{"tests-tooling", "operator", "crds"}))
}

func TestCrossNamespaceSourceRefused(t *testing.T) {
	g := NewWithT(t)
	ns := operatortest.Namespace(t)
	env := operatortest.Env(ns, "borrower").Source(operatortest.SharedOCISource()).Components(operatortest.ScriptedComponent("api")).Obj()
	env.Spec.Sources = append(env.Spec.Sources, v1alpha1.Source{Name: "flux", SourceRef: &v1alpha1.FluxSourceReference{Kind: "GitRepository", Name: "app", Namespace: "flux-system"}})
	g.Expect(operatortest.Admin.Create(context.Background(), env)).To(Succeed())

	env = operatortest.WaitForEnv(t, client.ObjectKeyFromObject(env), func(g Gomega, env *v1alpha1.DevEnvironment) {
		stalled := operatortest.EnvCondition(env, v1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Reason).To(Equal(v1alpha1.ReasonInvalidSpec))
		g.Expect(stalled.Message).To(ContainSubstring("spec.sources[1].sourceRef.namespace"))
		g.Expect(stalled.Message).To(ContainSubstring("--no-cross-namespace-refs"))
	})
	operatortest.ExpectKstatus(t, env, status.FailedStatus)
}

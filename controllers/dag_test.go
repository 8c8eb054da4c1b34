package controllers_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// diamond is a → (b, c) → d.
func diamond() []v1alpha1.Component {
	return []v1alpha1.Component{operatortest.ScriptedComponent("a"), operatortest.ScriptedComponent("b", "a"), operatortest.ScriptedComponent("c", "a"), operatortest.ScriptedComponent("d", "b", "c")}
}

// TestBrokenMiddleOfADiamondBlocksOnlyItsBranch: with c failing, b (which
// depends only on a) is deployed and Ready, d is Blocked naming c, and
// once c heals d follows without a nudge.
func TestBrokenMiddleOfADiamondBlocksOnlyItsBranch(t *testing.T) {
	g := NewWithT(t)
	ns := operatortest.Namespace(t)
	operatortest.ScriptedDeploy.Set(ns, "c", "", errors.New("helm install c: 1 error occurred:\n\t* job c-hook failed: BackoffLimitExceeded"))
	env := operatortest.Env(ns, "diamond").Source(operatortest.SharedOCISource()).Components(diamond()...).Obj()
	g.Expect(operatortest.Admin.Create(context.Background(), env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)

	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(operatortest.PhaseOf(env, "a")).To(Equal(v1alpha1.PhaseReady))
		g.Expect(operatortest.PhaseOf(env, "b")).To(Equal(v1alpha1.PhaseReady), "b depends only on a")
		g.Expect(operatortest.PhaseOf(env, "c")).To(Equal(v1alpha1.PhaseFailed))
		d := env.Status.Component("d")
		g.Expect(d).NotTo(BeNil())
		g.Expect(d.Phase).To(Equal(v1alpha1.PhaseBlocked))
		g.Expect(d.WaitingFor).To(Equal([]string{"c"}))
		g.Expect(d.Message).To(Equal("waiting for c (Failed) to be Ready"))
		ready := operatortest.EnvCondition(env, v1alpha1.ConditionReady)
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Message).To(ContainSubstring("component c: helm install c: 1 error occurred: job c-hook failed: BackoffLimitExceeded"),
			"the cause, not only the first line")
		g.Expect(env.Status.Component("c").Message).To(Equal("helm install c: 1 error occurred: job c-hook failed: BackoffLimitExceeded"))
		g.Expect(operatortest.EnvCondition(env, v1alpha1.ConditionReconciling)).NotTo(BeNil(), "a transient failure is retried")
	})
	g.Expect(operatortest.ScriptedDeploy.Calls(ns, "b")).To(BeNumerically(">", 0))
	g.Expect(operatortest.ScriptedDeploy.Calls(ns, "d")).To(BeZero(), "a blocked component is never handed to the engine")
	operatortest.ExpectKstatus(t, env, status.InProgressStatus)

	operatortest.ScriptedDeploy.Set(ns, "c", v1alpha1.PhaseReady, nil)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		g.Expect(operatortest.PhaseOf(env, "d")).To(Equal(v1alpha1.PhaseReady))
	})
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)
}

// TestStalledComponentStallsOnlyWhenNothingElseMoves: a component that
// needs a human stalls the environment once the rest of the DAG has done
// what it can, with the component's reason.
func TestStalledComponentStallsOnlyWhenNothingElseMoves(t *testing.T) {
	g := NewWithT(t)
	ns := operatortest.Namespace(t)
	operatortest.ScriptedDeploy.Set(ns, "c", "", fault.Stalledf(v1alpha1.ReasonDeployFailed, "helm release c failed 3 times in a row"))
	operatortest.ScriptedDeploy.Set(ns, "b", v1alpha1.PhaseDeploying, nil)
	env := operatortest.Env(ns, "stalls").Source(operatortest.SharedOCISource()).Components(diamond()...).Obj()
	g.Expect(operatortest.Admin.Create(context.Background(), env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)

	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(operatortest.PhaseOf(env, "c")).To(Equal(v1alpha1.PhaseFailed))
		g.Expect(operatortest.EnvCondition(env, v1alpha1.ConditionReconciling)).NotTo(BeNil(), "b is still rolling out")
		g.Expect(operatortest.EnvCondition(env, v1alpha1.ConditionStalled)).To(BeNil())
		g.Expect(operatortest.EnvCondition(env, v1alpha1.ConditionReady).Message).To(And(
			ContainSubstring("not Ready: b, d"), ContainSubstring("component c: helm release c failed")))
	})
	operatortest.ExpectKstatus(t, env, status.InProgressStatus)

	operatortest.ScriptedDeploy.Set(ns, "b", v1alpha1.PhaseReady, nil)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(operatortest.PhaseOf(env, "b")).To(Equal(v1alpha1.PhaseReady))
		stalled := operatortest.EnvCondition(env, v1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Reason).To(Equal(v1alpha1.ReasonDeployFailed))
		g.Expect(stalled.Message).To(Equal("component c: helm release c failed 3 times in a row"))
		g.Expect(env.Status.ObservedGeneration).To(Equal(env.Generation))
	})
	operatortest.ExpectKstatus(t, env, status.FailedStatus)
}

// TestListOrderNeverChangesTheOutcome: every permutation of the diamond's
// component list, c failing, ends the same way.
func TestListOrderNeverChangesTheOutcome(t *testing.T) {
	g := NewWithT(t)
	ns := operatortest.Namespace(t)
	operatortest.ScriptedDeploy.Set(ns, "c", "", errors.New("chart c is broken"))
	perms := permutations(diamond())
	for i, comps := range perms {
		env := operatortest.Env(ns, fmt.Sprintf("order-%d", i)).Source(operatortest.SharedOCISource()).Components(comps...).Obj()
		g.Expect(operatortest.Admin.Create(context.Background(), env)).To(Succeed())
	}
	want := map[string]v1alpha1.ComponentPhase{"a": v1alpha1.PhaseReady, "b": v1alpha1.PhaseReady, "c": v1alpha1.PhaseFailed, "d": v1alpha1.PhaseBlocked}
	for i := range perms {
		key := client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("order-%d", i)}
		operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
			for name, phase := range want {
				g.Expect(operatortest.PhaseOf(env, name)).To(Equal(phase), "component %s of %s", name, key.Name)
			}
			g.Expect(env.Status.Component("d").WaitingFor).To(Equal([]string{"c"}))
		})
	}
}

// permutations are every ordering of comps.
func permutations(comps []v1alpha1.Component) [][]v1alpha1.Component {
	if len(comps) <= 1 {
		return [][]v1alpha1.Component{append([]v1alpha1.Component(nil), comps...)}
	}
	var out [][]v1alpha1.Component
	for i := range comps {
		rest := append(append([]v1alpha1.Component(nil), comps[:i]...), comps[i+1:]...)
		for _, p := range permutations(rest) {
			out = append(out, append([]v1alpha1.Component{comps[i]}, p...))
		}
	}
	return out
}

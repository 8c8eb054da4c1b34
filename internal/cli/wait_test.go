package cli

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
)

// The test writes status as the operator would; wait follows it.

func TestWaitReturnsWhenReady(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "cli-")
	createEnv(t, ns, "team", teamSpec())
	out, errOut, wait := pluginInBackground(t, testOptions(), "wait", "team", "-n", ns)

	playOperator(t, ns, "team", func(env *v1alpha1.DevEnvironment) {
		env.Status.Components = []v1alpha1.ComponentStatus{{Name: "crds", Phase: v1alpha1.PhaseReady}, {Name: "web", Phase: v1alpha1.PhaseBuilding}}
		env.Status.ComponentsReady = "1/2"
		env.Status.ObservedGeneration = env.Generation
		env.Status.Conditions = []metav1.Condition{
			operatorCondition(env, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonProgressing, "1 of 2 components not Ready: web"),
			operatorCondition(env, v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonProgressing, "1 of 2 components not Ready: web"),
		}
	})
	waitUntil(t, "progress naming web Building", func() bool { return strings.Contains(out.String(), "web Building") })
	playOperator(t, ns, "team", func(env *v1alpha1.DevEnvironment) {
		env.Status.Components[1].Phase = v1alpha1.PhaseReady
		env.Status.ComponentsReady = "2/2"
		env.Status.Conditions = []metav1.Condition{operatorCondition(env, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSucceeded, "2/2 components ready")}
	})
	if code := wait(); code != 0 {
		t.Fatalf("wait exited %d\n%s%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "devenvironment/team Ready in") {
		t.Fatalf("no Ready line:\n%s", out.String())
	}
}

func TestWaitFailsWithTheStalledReason(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "cli-")
	createEnv(t, ns, "team", teamSpec())
	playOperator(t, ns, "team", func(env *v1alpha1.DevEnvironment) {
		env.Status.ObservedGeneration = env.Generation
		msg := "component web: push access denied to registry.test/team/web: check credentialsRef"
		env.Status.Conditions = []metav1.Condition{
			operatorCondition(env, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonBuildFailed, msg),
			operatorCondition(env, v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonBuildFailed, msg),
		}
	})
	r := plugin(t, "wait", "team", "-n", ns)
	if r.code != 1 || !strings.Contains(r.err, "Stalled (BuildFailed): component web: push access denied") {
		t.Fatalf("want exit 1 with the Stalled reason and message, got\n%s", r)
	}
}

func TestWaitTimesOutSayingWhatItSaw(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "cli-")
	createEnv(t, ns, "team", teamSpec())
	r := plugin(t, "wait", "team", "-n", ns, "--timeout", "300ms")
	if r.code != 1 || !strings.Contains(r.err, "timed out after") || !strings.Contains(r.err, "waiting for the operator to observe generation 1") {
		t.Fatalf("want a timeout naming what it waited for, got\n%s", r)
	}
}

func TestWaitNamesAMissingEnvironment(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "cli-")
	r := plugin(t, "wait", "nope", "-n", ns)
	if r.code != 1 || !strings.Contains(r.err, `devenvironment "nope" not found in namespace "`+ns+`"`) {
		t.Fatalf("got\n%s", r)
	}
}

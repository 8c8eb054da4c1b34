package cli

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
)

// TestFollowSeesAChangeAsItIsWritten: a follow learns of the
// environment's new status from a watch, not from its next read: with
// the poll interval an hour, `wait` still sees the environment become
// Ready and exits (before: it read once, then slept the hour).
func TestFollowSeesAChangeAsItIsWritten(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "cli-")
	createEnv(t, ns, "team", teamSpec())
	opts := testOptions()
	opts.PollInterval = time.Hour
	out, errOut, wait := pluginInBackground(t, opts, "wait", "team", "-n", ns)
	waitUntil(t, "the first look", func() bool { return strings.Contains(out.String(), "waiting for the operator") })

	playOperator(t, ns, "team", func(env *v1alpha1.DevEnvironment) {
		env.Status.Components = []v1alpha1.ComponentStatus{{Name: "crds", Phase: v1alpha1.PhaseReady}, {Name: "web", Phase: v1alpha1.PhaseReady}}
		env.Status.ComponentsReady = "2/2"
		env.Status.ObservedGeneration = env.Generation
		env.Status.Conditions = []metav1.Condition{operatorCondition(env, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSucceeded, "2/2 components ready")}
	})
	if code := wait(); code != 0 {
		t.Fatalf("wait exited %d\n%s%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "devenvironment/team Ready in") {
		t.Fatalf("no Ready line:\n%s", out.String())
	}
}

package cli

import (
	"bytes"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
)

// hostile is what a tenant can put in a message or log: a window title
// (OSC 0, ended by BEL) and a screen clear (CSI 2J).
const hostile = "build failed \x1b]0;pwned\x07 then \x1b[2J cleared"

// escaped is hostile as the plugin prints it.
const escaped = `build failed \x1b]0;pwned\x07 then \x1b[2J cleared`

// expectNoTerminalControl: nothing printed is a control character a
// terminal acts on, and hostile's show as escapes.
func expectNoTerminalControl(t *testing.T, printed string) {
	t.Helper()
	if strings.ContainsAny(printed, "\x1b\x07\r") {
		t.Fatalf("control characters reached the terminal:\n%q", printed)
	}
	if !strings.Contains(printed, escaped) {
		t.Fatalf("want the escapes shown as %s:\n%s", escaped, printed)
	}
}

func TestPrintableEscapesTerminalControls(t *testing.T) {
	for in, want := range map[string]string{
		hostile:                        escaped,
		"line one\nline\ttwo":          "line one\nline\ttwo",
		"over\rwrite":                  `over\rwrite`,
		"8-bit CSI \u009b2J":           `8-bit CSI \u009b2J`,
		"bidi \u202edesrever":          `bidi \u202edesrever`,
		"not UTF-8 \x9b2J":             `not UTF-8 \x9b2J`,
		"del\x7f and ünïcödé are kept": `del\x7f and ünïcödé are kept`,
	} {
		if got := printable(in); got != want {
			t.Errorf("printable(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestTenantStringsReachTheTerminalEscaped: the condition messages,
// component message and build and test log tails of an environment
// (what its builds, tests and charts can write) are printed by status
// and wait with their terminal controls escaped.
func TestTenantStringsReachTheTerminalEscaped(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "cli-")
	createEnv(t, ns, "team", teamSpec())
	playOperator(t, ns, "team", func(env *v1alpha1.DevEnvironment) {
		env.Status.ObservedGeneration = env.Generation
		env.Status.Conditions = []metav1.Condition{
			operatorCondition(env, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonBuildFailed, "component web: "+hostile),
			operatorCondition(env, v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonBuildFailed, "component web: "+hostile),
		}
		env.Status.Components = []v1alpha1.ComponentStatus{{Name: "web", Phase: v1alpha1.PhaseFailed, Message: hostile, Images: []v1alpha1.ImageStatus{{
			Name: "web", Build: &v1alpha1.BuildStatus{Job: "web-build", Result: v1alpha1.BuildFailed, ExitCode: ptr.To[int32](2), LogTail: "compiling\n" + hostile + "\n"},
		}}}}
		setRun(env, "unit", v1alpha1.TestRun{Number: 1, Result: v1alpha1.ResultFailed, ExitCode: ptr.To[int32](1), JobName: "unit-1", LogTail: hostile})
	})
	status := plugin(t, "status", "team", "-n", ns)
	expectNoTerminalControl(t, status.out+status.err)
	wait := plugin(t, "wait", "team", "-n", ns)
	if wait.code != 1 {
		t.Fatalf("wait: want exit 1 (Stalled), got\n%s", wait)
	}
	expectNoTerminalControl(t, wait.out+wait.err)
}

// TestFailedRunsLogTailIsEscaped: trigger's report of a failed run
// prints its log tail escaped.
func TestFailedRunsLogTailIsEscaped(t *testing.T) {
	var out bytes.Buffer
	a := &app{streams: genericiooptions.IOStreams{Out: &out, ErrOut: &out}}
	run := &v1alpha1.TestRun{Number: 3, Result: v1alpha1.ResultFailed, ExitCode: ptr.To[int32](1), JobName: "unit-3", LogTail: "ok\n" + hostile + "\n"}
	if err := runsOutcome(a, "team", []string{"unit"}, map[string]*v1alpha1.TestRun{"unit": run}, nil); err == nil {
		t.Fatal("a failed run must fail the command")
	}
	expectNoTerminalControl(t, out.String())
}

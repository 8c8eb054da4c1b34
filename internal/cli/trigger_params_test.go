package cli

import (
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
)

// paramsSpec is teamSpec with params on the e2e suite.
func paramsSpec() v1alpha1.DevEnvironmentSpec {
	spec := teamSpec()
	spec.Tests[1].Params = []string{"E2E_FOCUS", "E2E_SKIP"}
	return spec
}

func TestTriggerWithParamsWritesThemAndFollowsThatRun(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "cli-")
	createEnv(t, ns, "team", paramsSpec())
	out, errOut, wait := pluginInBackground(t, testOptions(), "trigger", "team", "e2e", "--env", "E2E_FOCUS=Job|Pod, fast", "--env", "E2E_SKIP=Flaky", "-n", ns)

	const value = "e2e(E2E_FOCUS=Job%7CPod%2C+fast;E2E_SKIP=Flaky)"
	waitUntil(t, "the trigger with params", func() bool { return annotation(t, ns, "team") == value })
	params := []v1alpha1.EnvVar{{Name: "E2E_FOCUS", Value: "Job|Pod, fast"}, {Name: "E2E_SKIP", Value: "Flaky"}}
	consumeTrigger(t, ns, "team", func(env *v1alpha1.DevEnvironment) {
		// Someone else's run with other params, newer: not ours.
		setRun(env, "e2e", v1alpha1.TestRun{Number: 1, Result: v1alpha1.ResultRunning, JobName: "e2e-1", Params: params})
		setRun(env, "e2e", v1alpha1.TestRun{Number: 2, Result: v1alpha1.ResultPending, Params: params[1:]})
	})
	waitUntil(t, "progress of the run with our params", func() bool { return strings.Contains(out.String(), "e2e #1 Running (job e2e-1)") })
	playOperator(t, ns, "team", func(env *v1alpha1.DevEnvironment) {
		setRun(env, "e2e", v1alpha1.TestRun{Number: 1, Result: v1alpha1.ResultPassed, ExitCode: ptr.To[int32](0), JobName: "e2e-1", Params: params})
	})
	if code := wait(); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errOut.String())
	}
	r := plugin(t, "status", "team", "-n", ns)
	if !strings.Contains(r.out, "E2E_SKIP=Flaky") {
		t.Fatalf("status does not show the run's params:\n%s", r)
	}
}

func TestTriggerRefusesUnknownParamsBeforeWriting(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "cli-")
	createEnv(t, ns, "team", paramsSpec())
	for flag, want := range map[string][]string{
		"GOFLAGS=-v":     {"e2e", "suite e2e does not accept GOFLAGS", "Accepted params: E2E_FOCUS, E2E_SKIP"},
		"E2E_FOCUS=Job":  {"unit", "suite unit does not accept E2E_FOCUS", "lists no tests[].params"},
		"1BAD=x":         {"e2e", "want NAME=value"},
		"E2E_FOCUS":      {"e2e", "want NAME=value"},
		"E2E_SKIP=a,b=c": {"label:e2e", "suite smoke does not accept E2E_SKIP"},
	} {
		r := plugin(t, "trigger", "team", want[0], "--env", flag, "-n", ns)
		for _, w := range want[1:] {
			if r.code != 1 || !strings.Contains(r.err, w) {
				t.Errorf("trigger %s --env %s: want %q, got\n%s", want[0], flag, w, r)
			}
		}
	}
	if got := annotation(t, ns, "team"); got != "" {
		t.Fatalf("a refused trigger wrote trigger=%q", got)
	}
}

package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
)

// The operator side of triggers (issue 5) is not on this branch: these
// tests play it by hand — consume the annotation, record runs, write
// results — the way the issue specifies it.

// consumeTrigger is the operator recording that it acted on the trigger:
// the annotation removed, its value in status.lastHandledTrigger, and runs
// added by addRuns.
func consumeTrigger(t *testing.T, ns, name string, addRuns func(env *v1alpha1.DevEnvironment)) {
	t.Helper()
	env := getEnv(t, ns, name)
	value := env.Annotations[v1alpha1.TriggerAnnotation]
	patched := env.DeepCopy()
	delete(patched.Annotations, v1alpha1.TriggerAnnotation)
	if err := k8s.Patch(context.Background(), patched, client.MergeFrom(env)); err != nil {
		t.Fatal(err)
	}
	playOperator(t, ns, name, func(env *v1alpha1.DevEnvironment) {
		env.Status.LastHandledTrigger = value
		addRuns(env)
	})
}

func annotation(t *testing.T, ns, name string) string {
	return getEnv(t, ns, name).Annotations[v1alpha1.TriggerAnnotation]
}

// setRun adds or replaces run r of suite, newest first.
func setRun(env *v1alpha1.DevEnvironment, suite string, r v1alpha1.TestRun) {
	for i := range env.Status.Tests {
		ts := &env.Status.Tests[i]
		if ts.Name != suite {
			continue
		}
		for j := range ts.Runs {
			if ts.Runs[j].Number == r.Number {
				ts.Runs[j] = r
				return
			}
		}
		ts.Runs = append([]v1alpha1.TestRun{r}, ts.Runs...)
		return
	}
	env.Status.Tests = append(env.Status.Tests, v1alpha1.TestStatus{Name: suite, Runs: []v1alpha1.TestRun{r}})
}

func TestTriggerFollowsTheNewRunsAndFailsIfOneFailed(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "cli-")
	createEnv(t, ns, "team", teamSpec())
	// An earlier run that passed must not be taken for the new one.
	playOperator(t, ns, "team", func(env *v1alpha1.DevEnvironment) {
		setRun(env, "unit", v1alpha1.TestRun{Number: 1, Result: v1alpha1.ResultPassed, JobName: "unit-1"})
	})
	out, errOut, wait := pluginInBackground(t, testOptions(), "trigger", "team", "unit", "label:e2e", "-n", ns)

	waitUntil(t, "the trigger annotation", func() bool { return annotation(t, ns, "team") == "unit,label:e2e" })
	// The plugin prints the expanded list after it wrote the annotation.
	waitUntil(t, "label:e2e expanded to its suites", func() bool { return strings.Contains(out.String(), "suites: unit, e2e, smoke") })
	consumeTrigger(t, ns, "team", func(env *v1alpha1.DevEnvironment) {
		setRun(env, "unit", v1alpha1.TestRun{Number: 2, Result: v1alpha1.ResultPending})
		setRun(env, "e2e", v1alpha1.TestRun{Number: 1, Result: v1alpha1.ResultRunning, JobName: "e2e-1"})
		setRun(env, "smoke", v1alpha1.TestRun{Number: 1, Result: v1alpha1.ResultRunning, JobName: "smoke-1"})
	})
	waitUntil(t, "progress of the runs", func() bool { return strings.Contains(out.String(), "e2e #1 Running (job e2e-1)") })
	playOperator(t, ns, "team", func(env *v1alpha1.DevEnvironment) {
		setRun(env, "unit", v1alpha1.TestRun{Number: 2, Result: v1alpha1.ResultPassed, ExitCode: ptr.To[int32](0), JobName: "unit-2"})
		setRun(env, "e2e", v1alpha1.TestRun{Number: 1, Result: v1alpha1.ResultPassed, ExitCode: ptr.To[int32](0), JobName: "e2e-1"})
	})
	waitUntil(t, "unit #2 Passed", func() bool { return strings.Contains(out.String(), "unit #2 Passed (exit 0)") })
	playOperator(t, ns, "team", func(env *v1alpha1.DevEnvironment) {
		setRun(env, "smoke", v1alpha1.TestRun{Number: 1, Result: v1alpha1.ResultFailed, ExitCode: ptr.To[int32](3), JobName: "smoke-1", LogTail: "checking /healthz\nFAIL: 503\n"})
	})
	code := wait()
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(errOut.String(), "smoke #1 Failed (exit 3)") || !strings.Contains(out.String(), "FAIL: 503") ||
		!strings.Contains(out.String(), "kubectl devloop logs team smoke --run 1") {
		t.Fatalf("want the failed run, its log tail and how to read the rest:\n%s%s", out.String(), errOut.String())
	}
}

func TestTriggerNeverClobbersAPendingTrigger(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "cli-")
	env := createEnv(t, ns, "team", teamSpec())
	// Someone else's trigger, not consumed yet.
	patched := env.DeepCopy()
	patched.Annotations = map[string]string{v1alpha1.TriggerAnnotation: "unit"}
	if err := k8s.Patch(context.Background(), patched, client.MergeFrom(env)); err != nil {
		t.Fatal(err)
	}
	out, errOut, wait := pluginInBackground(t, testOptions(), "trigger", "team", "e2e", "-n", ns)

	waitUntil(t, "the plugin to say it waits", func() bool {
		return strings.Contains(out.String(), "trigger=unit is still pending")
	})
	time.Sleep(200 * time.Millisecond) // a few polls: it must still not write
	if got := annotation(t, ns, "team"); got != "unit" {
		t.Fatalf("pending trigger clobbered: trigger=%q", got)
	}
	consumeTrigger(t, ns, "team", func(env *v1alpha1.DevEnvironment) {
		setRun(env, "unit", v1alpha1.TestRun{Number: 1, Result: v1alpha1.ResultRunning})
	})
	waitUntil(t, "our trigger", func() bool { return annotation(t, ns, "team") == "e2e" })
	consumeTrigger(t, ns, "team", func(env *v1alpha1.DevEnvironment) {
		setRun(env, "e2e", v1alpha1.TestRun{Number: 1, Result: v1alpha1.ResultPassed, ExitCode: ptr.To[int32](0)})
	})
	if code := wait(); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "all 1 passed") {
		t.Fatal(out.String())
	}
}

func TestTriggerRefusesUnknownSuitesBeforeWriting(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "cli-")
	createEnv(t, ns, "team", teamSpec())
	for args, want := range map[string]string{
		"nope":        `has no test suite "nope": its suites are unit, e2e, smoke`,
		"label:perf":  `no suite of devenvironment/team has the label "perf"`,
		"unit@token1": "token triggers suite@token are for objects kept in Git",
	} {
		r := plugin(t, "trigger", "team", args, "-n", ns)
		if r.code != 1 || !strings.Contains(r.err, want) {
			t.Errorf("trigger %s: want %q, got\n%s", args, want, r)
		}
	}
	if got := annotation(t, ns, "team"); got != "" {
		t.Fatalf("a refused trigger wrote trigger=%q", got)
	}
}

func TestCancelFollowsTheRunToCancelled(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "cli-")
	createEnv(t, ns, "team", teamSpec())

	r := plugin(t, "cancel", "team", "unit", "-n", ns)
	if r.code != 1 || !strings.Contains(r.err, "nothing to cancel: unit is not running (it has never run)") {
		t.Fatalf("cancel with no run:\n%s", r)
	}

	playOperator(t, ns, "team", func(env *v1alpha1.DevEnvironment) {
		setRun(env, "unit", v1alpha1.TestRun{Number: 3, Result: v1alpha1.ResultRunning, JobName: "unit-3", StartTime: &metav1.Time{Time: time.Now()}})
	})
	out, errOut, wait := pluginInBackground(t, testOptions(), "cancel", "team", "unit", "-n", ns)
	waitUntil(t, "the cancel trigger", func() bool { return annotation(t, ns, "team") == "cancel:unit" })
	consumeTrigger(t, ns, "team", func(env *v1alpha1.DevEnvironment) {
		setRun(env, "unit", v1alpha1.TestRun{Number: 3, Result: v1alpha1.ResultCancelled, JobName: "unit-3"})
	})
	if code := wait(); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "unit #3 cancelled in") {
		t.Fatal(out.String())
	}
}

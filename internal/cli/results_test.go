package cli

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

func resultsRun() *v1alpha1.TestRun {
	var failures []string
	for i := range 7 {
		failures = append(failures, fmt.Sprintf("util.TestFail%d", i))
	}
	return &v1alpha1.TestRun{Number: 4, Result: v1alpha1.ResultFailed, ExitCode: ptr.To[int32](1),
		StartTime: at(3 * time.Minute), CompletionTime: at(2 * time.Minute),
		Results: &v1alpha1.TestResults{Passed: 40, Failed: 7, Skipped: 2, Failures: failures, Flaky: []string{"util.TestRace"}}}
}

// status shows a run's counts on its line, its first failures and its
// flaky tests below.
func TestStatusShowsTestResults(t *testing.T) {
	g := NewWithT(t)
	r := resultsRun()
	v := &StatusView{Name: "volcano", Namespace: "dev", Tests: []TestView{{TestStatus: v1alpha1.TestStatus{Name: "unit", Runs: []v1alpha1.TestRun{*r}}, LastRun: r}}}
	var buf bytes.Buffer
	renderTree(&buf, v, palette{}, now)
	out := buf.String()
	g.Expect(out).To(ContainSubstring("unit  #4 Failed (exit 1, 40 passed, 7 failed, 2 skipped, 2m ago)"))
	g.Expect(out).To(ContainSubstring("failed: util.TestFail0"))
	g.Expect(out).To(ContainSubstring("failed: util.TestFail4"))
	g.Expect(out).NotTo(ContainSubstring("util.TestFail5"))
	g.Expect(out).To(ContainSubstring("… 2 more failed"))
	g.Expect(out).To(ContainSubstring("flaky: util.TestRace"))
}

// trigger, once the runs end, prints their counts and failed and flaky
// tests, passed runs included, and the error carries the counts.
func TestTriggerPrintsTestResults(t *testing.T) {
	g := NewWithT(t)
	var buf bytes.Buffer
	a := &app{streams: genericiooptions.IOStreams{Out: &buf, ErrOut: &buf}}
	passed := &v1alpha1.TestRun{Number: 2, Result: v1alpha1.ResultPassed, ExitCode: ptr.To[int32](0),
		CompletionTime: &metav1.Time{Time: now}, Results: &v1alpha1.TestResults{Passed: 12, Skipped: 1}}
	runs := map[string]*v1alpha1.TestRun{"unit": resultsRun(), "smoke": passed}
	err := runsOutcome(a, "volcano", []string{"smoke", "unit"}, runs, newProgress(&buf, time.Hour))
	g.Expect(err).To(MatchError(ContainSubstring("unit #4 Failed (exit 1; 40 passed, 7 failed, 2 skipped)")))
	g.Expect(buf.String()).To(ContainSubstring("smoke #2: 12 passed, 0 failed, 1 skipped\n"))
	g.Expect(buf.String()).To(ContainSubstring("unit #4: 40 passed, 7 failed, 2 skipped\n  failed: util.TestFail0\n"))
	g.Expect(buf.String()).To(ContainSubstring("  flaky: util.TestRace (failed and passed on the same images)\n"))
}

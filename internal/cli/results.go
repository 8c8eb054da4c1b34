package cli

import (
	"fmt"
	"io"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// shownFailures is how many failed tests status and trigger name; the
// run's status holds up to 16 (kubectl devloop status -o json).
const shownFailures = 5

// resultCounts is "4 passed, 1 failed, 1 skipped", or "" for a run
// without per-test results.
func resultCounts(r *v1alpha1.TestResults) string {
	if r == nil {
		return ""
	}
	return fmt.Sprintf("%d passed, %d failed, %d skipped", r.Passed, r.Failed, r.Skipped)
}

// resultLines name a run's failed tests (the first few) and its flaky
// ones (failed here and passed on the same digests, or the reverse):
// "failed: TestX", "flaky: TestY".
func resultLines(r *v1alpha1.TestResults) []string {
	if r == nil {
		return nil
	}
	var lines []string
	for i, f := range r.Failures {
		if i == shownFailures {
			lines = append(lines, fmt.Sprintf("… %d more failed (kubectl devloop status -o json)", int(r.Failed)-shownFailures))
			break
		}
		lines = append(lines, "failed: "+f)
	}
	for _, f := range r.Flaky {
		lines = append(lines, "flaky: "+f+" (failed and passed on the same images)")
	}
	return lines
}

// printResults prints a finished run's per-test results, when it has
// any: the counts, then its failed and flaky tests.
func printResults(w io.Writer, suite string, r *v1alpha1.TestRun) {
	if r.Results == nil {
		return
	}
	fmt.Fprintf(w, "%s #%d: %s\n", suite, r.Number, resultCounts(r.Results))
	for _, l := range resultLines(r.Results) {
		fmt.Fprintf(w, "  %s\n", printable(l))
	}
}

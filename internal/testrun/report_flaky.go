package testrun

import (
	"maps"
	"slices"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// Flaky names the tests of run that failed here and passed in another of
// runs on the same image digests and params, or passed here and failed
// there, the first MaxFailedNames.
//
// A run's status keeps failure names only, so "passed" is inferred: a
// test passed in a run with results whose failure list is complete
// (every failure named) and does not name it. Same digests and params
// mean the same tests ran, so a test missing from a complete list ran
// and did not fail. Runs without digests (a suite of an external image
// and no built dependencies) are never compared: their code can change
// under the same (empty) set, and a fixed test is not a flaky one.
func Flaky(run *v1alpha1.TestRun, runs []v1alpha1.TestRun) []string {
	if run.Results == nil || len(run.Images) == 0 {
		return nil
	}
	var out []string
	add := func(name string) {
		if len(out) < MaxFailedNames && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	for i := range runs {
		other := &runs[i]
		if other.Number == run.Number || other.Results == nil || !sameTests(run, other) {
			continue
		}
		if complete(other.Results) {
			for _, f := range run.Results.Failures {
				if !slices.Contains(other.Results.Failures, f) {
					add(f)
				}
			}
		}
		if complete(run.Results) {
			for _, f := range other.Results.Failures {
				if !slices.Contains(run.Results.Failures, f) {
					add(f)
				}
			}
		}
	}
	return out
}

// complete reports whether results name every failed test.
func complete(r *v1alpha1.TestResults) bool {
	return int(r.Failed) <= len(r.Failures)
}

// sameTests reports whether two runs ran the same tests: the same image
// digests and the same params.
func sameTests(a, b *v1alpha1.TestRun) bool {
	return maps.Equal(a.Images, b.Images) && slices.Equal(a.Params, b.Params)
}

// ShrinkResults bounds the results older runs keep, so a suite's ten
// runs stay small: the three newest finished runs keep their failure
// names (the newest its flaky names too), older ones their counts only.
// A run with counts only has an incomplete failure list, so Flaky does
// not infer passes from it.
func ShrinkResults(runs []v1alpha1.TestRun) {
	finished := 0
	for i := range runs {
		if !runs[i].Result.Finished() {
			continue
		}
		finished++
		r := runs[i].Results
		if r == nil {
			continue
		}
		if finished > 1 {
			r.Flaky = nil
		}
		if finished > 3 {
			r.Failures = nil
		}
	}
}

package testrun

import (
	"fmt"
	"sort"
	"time"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// FitHistory keeps the test history of all suites within the totals the
// CRD sets per environment (v1alpha1.MaxRuns, MaxRunImages, MaxRunParams,
// MaxRunLogTails, MaxResultNames), so a status write is never refused for
// its size. The oldest finished runs of any suite are dropped first, never
// a queued or running one (enqueue queues none the history cannot hold);
// then log tails and result names are shortened, the newest runs keeping
// theirs. Should the images of running runs alone exceed their total, the
// oldest running runs' images-under-test are left out.
func FitHistory(tests []v1alpha1.TestStatus) {
	for _, r := range oldestFinishedFirst(tests) {
		if withinCounts(tests) {
			break
		}
		st := &tests[r.suite]
		st.Runs = removeRun(st.Runs, r.number)
	}
	order := newestFirst(tests)
	images := 0
	for _, r := range order {
		images += len(r.run.Images)
	}
	for i := len(order) - 1; i >= 0 && images > v1alpha1.MaxRunImages; i-- {
		images -= len(order[i].run.Images)
		order[i].run.Images = nil
	}
	tails, names := v1alpha1.MaxRunLogTails, v1alpha1.MaxResultNames
	for _, r := range order {
		r.run.LogTail = Tail(r.run.LogTail, tails)
		tails -= len(r.run.LogTail)
		if res := r.run.Results; res != nil {
			res.Failures = cutNames(res.Failures, &names)
			res.Flaky = cutNames(res.Flaky, &names)
		}
	}
}

// QueueRoom says why the history cannot take one more queued run with
// params, or "" when it can: the unfinished runs, which are never dropped,
// must stay within the environment's totals.
func QueueRoom(tests []v1alpha1.TestStatus, params []v1alpha1.EnvVar) string {
	runs, withParams := 0, 0
	for _, st := range tests {
		for _, r := range st.Runs {
			if !r.Result.Finished() {
				runs++
				withParams += len(r.Params)
			}
		}
	}
	if runs+1 > v1alpha1.MaxRuns {
		return fmt.Sprintf("the environment has %d runs queued or running, the most its status holds (status.tests[].runs)", runs)
	}
	if withParams+len(params) > v1alpha1.MaxRunParams {
		return fmt.Sprintf("the runs queued or running hold %d params and these %d more would pass the %d the environment's status holds (status.tests[].runs[].params)", withParams, len(params), v1alpha1.MaxRunParams)
	}
	return ""
}

// roomFor reports whether a request with params for suite st would be
// answered: it joins the run queued with the same params, or the history
// has room for one more (QueueRoom).
func roomFor(tests []v1alpha1.TestStatus, st *v1alpha1.TestStatus, params []v1alpha1.EnvVar) bool {
	for _, r := range st.Runs {
		if r.Result == v1alpha1.ResultPending && SameParams(r.Params, params) {
			return true
		}
	}
	return QueueRoom(tests, params) == ""
}

// withinCounts reports whether the runs, their images and params are
// within their totals (what only dropping runs can bring down).
func withinCounts(tests []v1alpha1.TestStatus) bool {
	runs, images, params := 0, 0, 0
	for _, st := range tests {
		runs += len(st.Runs)
		for _, r := range st.Runs {
			images += len(r.Images)
			params += len(r.Params)
		}
	}
	return runs <= v1alpha1.MaxRuns && images <= v1alpha1.MaxRunImages && params <= v1alpha1.MaxRunParams
}

// runAt is a run of suite tests[suite] and when it ended (or started).
type runAt struct {
	suite  int
	number int64
	run    *v1alpha1.TestRun
	at     time.Time
}

// oldestFinishedFirst lists the finished runs, those that ended first
// first.
func oldestFinishedFirst(tests []v1alpha1.TestStatus) []runAt {
	var out []runAt
	for _, r := range runsOf(tests) {
		if r.run.Result.Finished() {
			out = append(out, r)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].at.Before(out[j].at) })
	return out
}

// newestFirst lists every run: unfinished ones first (their tails are
// the ones being watched), then finished ones, the last to end first.
func newestFirst(tests []v1alpha1.TestStatus) []runAt {
	out := runsOf(tests)
	sort.SliceStable(out, func(i, j int) bool {
		fi, fj := out[i].run.Result.Finished(), out[j].run.Result.Finished()
		if fi != fj {
			return fj
		}
		return out[i].at.After(out[j].at)
	})
	return out
}

func runsOf(tests []v1alpha1.TestStatus) []runAt {
	var out []runAt
	for i := range tests {
		for j := range tests[i].Runs {
			r := &tests[i].Runs[j]
			var at time.Time
			switch {
			case r.CompletionTime != nil:
				at = r.CompletionTime.Time
			case r.StartTime != nil:
				at = r.StartTime.Time
			}
			out = append(out, runAt{suite: i, number: r.Number, run: r, at: at})
		}
	}
	return out
}

func removeRun(runs []v1alpha1.TestRun, number int64) []v1alpha1.TestRun {
	out := runs[:0]
	for _, r := range runs {
		if r.Number != number {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// cutNames keeps as many of names as *left allows and takes them from it.
func cutNames(names []string, left *int) []string {
	if len(names) > *left {
		names = names[:*left]
	}
	*left -= len(names)
	if len(names) == 0 {
		return nil
	}
	return names
}

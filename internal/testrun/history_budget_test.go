package testrun

import (
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// suiteHistory is a suite with n runs, newest first: the finished ones
// ended minutesAgo, minutesAgo+1, ... before now; unfinished ones (first)
// have no end.
func suiteHistory(name string, unfinished, finished, minutesAgo int) v1alpha1.TestStatus {
	st := v1alpha1.TestStatus{Name: name}
	n := int64(unfinished + finished)
	for range unfinished {
		st.Runs = append(st.Runs, v1alpha1.TestRun{Number: n, Result: v1alpha1.ResultPending})
		n--
	}
	for i := range finished {
		at := metav1.NewTime(time.Now().Add(-time.Duration(minutesAgo+i) * time.Minute))
		st.Runs = append(st.Runs, v1alpha1.TestRun{Number: n, Result: v1alpha1.ResultPassed, StartTime: &at, CompletionTime: &at})
		n--
	}
	return st
}

func totalRuns(tests []v1alpha1.TestStatus) (runs, unfinished int) {
	for _, st := range tests {
		for _, r := range st.Runs {
			runs++
			if !r.Result.Finished() {
				unfinished++
			}
		}
	}
	return runs, unfinished
}

func TestFitHistoryDropsTheOldestFinishedRunsOfAnySuite(t *testing.T) {
	g := NewWithT(t)
	// 40 runs: a busy suite with recent runs, a quiet one whose runs
	// ended long ago, and one with only queued runs.
	tests := []v1alpha1.TestStatus{
		suiteHistory("busy", 1, 9, 0),
		suiteHistory("quiet", 0, 10, 600),
		suiteHistory("queued", 4, 0, 0),
		suiteHistory("mixed", 2, 8, 300),
		suiteHistory("late", 0, 6, 900),
	}
	FitHistory(tests)
	runs, unfinished := totalRuns(tests)
	g.Expect(runs).To(Equal(v1alpha1.MaxRuns))
	g.Expect(unfinished).To(Equal(7), "no queued or running run is dropped")
	// The 8 oldest finished runs go: all 6 of late (900 minutes ago and
	// more) and the 2 oldest of quiet (608 and 609 minutes ago).
	g.Expect(tests[4].Runs).To(BeEmpty())
	g.Expect(tests[1].Runs).To(HaveLen(8))
	g.Expect(tests[1].Runs[7].Number).To(Equal(int64(3)))
	g.Expect(tests[0].Runs).To(HaveLen(10))
	g.Expect(tests[3].Runs).To(HaveLen(10))
}

func TestFitHistoryShortensOlderTailsAndNames(t *testing.T) {
	g := NewWithT(t)
	tests := []v1alpha1.TestStatus{suiteHistory("a", 1, 4, 0), suiteHistory("b", 0, 5, 2)}
	for i := range tests {
		for j := range tests[i].Runs {
			r := &tests[i].Runs[j]
			r.LogTail = strings.Repeat("line of log\n", 400) // 4,800 bytes
			if r.Result.Finished() {
				r.Results = &v1alpha1.TestResults{Failed: 10, Failures: strings.Split("a,b,c,d,e,f,g,h,i,j", ",")}
			}
		}
	}
	FitHistory(tests)
	tails, names := 0, 0
	for _, st := range tests {
		for _, r := range st.Runs {
			tails += len(r.LogTail)
			if r.Results != nil {
				names += len(r.Results.Failures) + len(r.Results.Flaky)
			}
		}
	}
	g.Expect(tails).To(BeNumerically("<=", v1alpha1.MaxRunLogTails))
	g.Expect(names).To(Equal(v1alpha1.MaxResultNames))
	g.Expect(tests[0].Runs[0].LogTail).To(HaveLen(4800), "the running run's tail is kept first")
	g.Expect(tests[0].Runs[1].Results.Failures).To(HaveLen(10), "the newest finished run keeps its names")
	g.Expect(tests[1].Runs[4].Results.Failures).To(BeEmpty(), "the oldest loses its names")
	g.Expect(tests[1].Runs[4].LogTail).To(BeEmpty(), "and its tail")
}

func TestFitHistoryLeavesOutRunningRunsImagesOnlyWhenTheyAloneExceed(t *testing.T) {
	g := NewWithT(t)
	images := map[string]string{}
	for i := range 16 {
		images[fmt.Sprintf("image-%d", i)] = "sha256:" + strings.Repeat("d", 64)
	}
	var tests []v1alpha1.TestStatus
	for i := range 7 {
		st := suiteHistory(fmt.Sprintf("s%d", i), 0, 0, 0)
		start := metav1.NewTime(time.Now().Add(-time.Duration(i) * time.Minute))
		st.Runs = []v1alpha1.TestRun{{Number: 1, Result: v1alpha1.ResultRunning, StartTime: &start, Images: images}}
		tests = append(tests, st)
	}
	FitHistory(tests)
	n := 0
	for _, st := range tests {
		g.Expect(st.Runs).To(HaveLen(1), "a running run is never dropped")
		n += len(st.Runs[0].Images)
	}
	g.Expect(n).To(Equal(v1alpha1.MaxRunImages))
	g.Expect(tests[6].Runs[0].Images).To(BeNil(), "the run that started first leaves its images out")
}

func TestQueueRoomKeepsUnfinishedRunsWithinTheTotals(t *testing.T) {
	g := NewWithT(t)
	var tests []v1alpha1.TestStatus
	for i := range 8 {
		tests = append(tests, suiteHistory(fmt.Sprintf("s%d", i), 4, 6, 0))
	}
	g.Expect(QueueRoom(tests, nil)).To(ContainSubstring("32 runs queued or running"), "finished runs can be dropped, unfinished ones cannot")

	tests = tests[:7]
	g.Expect(QueueRoom(tests, nil)).To(BeEmpty())
	params := make([]v1alpha1.EnvVar, 8)
	for i := 0; i < 3; i++ {
		tests[i].Runs[0].Params = params
	}
	g.Expect(QueueRoom(tests, params)).To(BeEmpty(), "32 params fit")
	tests[3].Runs[0].Params = params[:1]
	g.Expect(QueueRoom(tests, params)).To(ContainSubstring("status.tests[].runs[].params"))
}

func TestOnChangeWaitsForRoomRatherThanLosingItsDigestSet(t *testing.T) {
	g := NewWithT(t)
	var tests []v1alpha1.TestStatus
	for i := range 8 {
		tests = append(tests, suiteHistory(fmt.Sprintf("s%d", i), 4, 0, 0))
	}
	g.Expect(roomFor(tests, &tests[0], nil)).To(BeTrue(), "a request joins the run queued with the same params")
	tests[0].Runs[0].Params = []v1alpha1.EnvVar{{Name: "A"}}
	tests[0].Runs[1].Params = []v1alpha1.EnvVar{{Name: "B"}}
	tests[0].Runs[2].Params = []v1alpha1.EnvVar{{Name: "C"}}
	tests[0].Runs[3].Params = []v1alpha1.EnvVar{{Name: "D"}}
	g.Expect(roomFor(tests, &tests[0], nil)).To(BeFalse(), "32 runs queued: none to join, no room for another")
}

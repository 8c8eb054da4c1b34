package testrun

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

func runs(results ...v1alpha1.TestResult) []v1alpha1.TestRun {
	var out []v1alpha1.TestRun
	for i, r := range results {
		out = append(out, v1alpha1.TestRun{Number: int64(len(results) - i), Result: r})
	}
	return out
}

func numbers(rs []v1alpha1.TestRun) []int64 {
	var n []int64
	for _, r := range rs {
		n = append(n, r.Number)
	}
	return n
}

func TestTrim(t *testing.T) {
	P, R, Q := v1alpha1.ResultPassed, v1alpha1.ResultRunning, v1alpha1.ResultPending
	cases := []struct {
		name          string
		runs          []v1alpha1.TestRun
		limit         int
		kept, dropped []int64
	}{
		{"under the limit", runs(P, P), 3, []int64{2, 1}, nil},
		{"oldest dropped", runs(P, P, P, P), 2, []int64{4, 3}, []int64{2, 1}},
		{"unfinished kept beyond the limit", runs(Q, R, P), 1, []int64{3, 2}, []int64{1}},
		{"limit one with queue", runs(Q, R), 1, []int64{2, 1}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			kept, dropped := Trim(c.runs, c.limit)
			g.Expect(numbers(kept)).To(Equal(c.kept))
			g.Expect(numbers(dropped)).To(Equal(c.dropped))
		})
	}
}

func TestTail(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Tail("short", 10)).To(Equal("short"))
	g.Expect(Tail("line one\nline two\nline three\n", 16)).To(Equal("line three\n"), "starts at a line")
	g.Expect(Tail(strings.Repeat("x", 100), 10)).To(Equal(strings.Repeat("x", 10)), "one long line is cut")
	cut := Tail(strings.Repeat("é", 100), 11)
	g.Expect(utf8.ValidString(cut)).To(BeTrue(), "no split character")
	g.Expect(len(cut)).To(BeNumerically("<=", 11))
}

func TestDigestSet(t *testing.T) {
	g := NewWithT(t)
	a := DigestSet(map[string]string{"api": "sha256:1", "web": "sha256:2"})
	g.Expect(DigestSet(map[string]string{"web": "sha256:2", "api": "sha256:1"})).To(Equal(a), "order does not matter")
	g.Expect(DigestSet(map[string]string{"api": "sha256:1", "web": "sha256:3"})).NotTo(Equal(a))
	g.Expect(DigestSet(map[string]string{"api": "sha256:1=web", "": "sha256:2"})).NotTo(Equal(a))
}

// TestWorstCaseTestStatusSize fills 32 suites with 10 finished runs, each
// with a 4 KiB log and 16 images, and prints how big status.tests gets
// once ShrinkTails has bounded it.
func TestWorstCaseTestStatusSize(t *testing.T) {
	g := NewWithT(t)
	now := metav1.Now()
	var tests []v1alpha1.TestStatus
	for s := 0; s < 32; s++ {
		st := v1alpha1.TestStatus{Name: strings.Repeat("s", 61) + string(rune('a'+s%26)) + string(rune('a'+s/26)),
			Message: strings.Repeat("m", 300), DigestSet: DigestSet(nil)}
		for n := 10; n >= 1; n-- {
			images := map[string]string{}
			for i := 0; i < 16; i++ {
				images[strings.Repeat("i", 61)+string(rune('a'+i))] = "sha256:" + strings.Repeat("0", 64)
			}
			st.Runs = append(st.Runs, v1alpha1.TestRun{
				Number: int64(n), Trigger: strings.Repeat("t", 300), Result: v1alpha1.ResultTimedOut,
				StartTime: &now, CompletionTime: &now, ExitCode: ptr.To[int32](137),
				JobName: strings.Repeat("j", 63), Images: images, LogTail: strings.Repeat("log line\n", 1000),
				Message: strings.Repeat("x", 1024), Requests: 1000,
			})
		}
		ShrinkTails(st.Runs)
		tests = append(tests, st)
	}
	data, err := json.Marshal(tests)
	g.Expect(err).NotTo(HaveOccurred())
	var tails int
	for _, st := range tests {
		for _, r := range st.Runs {
			tails += len(r.LogTail)
		}
	}
	t.Logf("worst-case status.tests: %d bytes (%.0f%% of etcd's 1.5 MiB), of which log tails %d bytes; without the shrinking the tails alone would be %d bytes",
		len(data), 100*float64(len(data))/(3<<19), tails, 32*10*MaxLogTail)
	g.Expect(tails).To(BeNumerically("<=", 32*(MaxLogTail+secondLogTail+8*oldLogTail)))
}

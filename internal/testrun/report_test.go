package testrun

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// A ginkgo --junit-report file: nested suites, a failure, an error
// (a panic), a skipped spec.
const junitReport = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="5" failures="1" errors="1">
  <testsuite name="Volcano E2E Suite" tests="5">
    <testcase name="[It] Job E2E Test: Schedule Job" classname="Volcano E2E Suite" time="1.2"></testcase>
    <testcase name="[It] Job E2E Test: Gang" classname="Volcano E2E Suite" time="3.1">
      <failure message="timed out" type="failed">expected 2 pods, got 1</failure>
    </testcase>
    <testcase name="[It] Queue E2E: reclaim" classname="Volcano E2E Suite"><skipped message="skipped"/></testcase>
    <testsuite name="inner">
      <testcase name="TestUtil" classname="volcano.sh/volcano/pkg/scheduler/util"/>
      <testcase name="TestPanics" classname="volcano.sh/volcano/pkg/scheduler/util"><error message="panic">boom</error></testcase>
    </testsuite>
  </testsuite>
</testsuites>`

func TestParseJUnit(t *testing.T) {
	g := NewWithT(t)
	s, err := ParseReport(strings.NewReader(junitReport), v1alpha1.ReportJUnit)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Passed).To(BeEquivalentTo(2))
	g.Expect(s.Failed).To(BeEquivalentTo(2))
	g.Expect(s.Skipped).To(BeEquivalentTo(1))
	g.Expect(s.Failures).To(Equal([]string{"Volcano E2E Suite.[It] Job E2E Test: Gang", "util.TestPanics"}))

	// A single <testsuite> root, as go-junit-report writes.
	s, err = ParseReport(strings.NewReader(`<testsuite name="x"><testcase name="TestA" classname="example.com/m/pkg"/></testsuite>`), v1alpha1.ReportJUnit)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s).To(Equal(Summary{Passed: 1}))
}

func TestParseJUnitMalformed(t *testing.T) {
	g := NewWithT(t)
	_, err := ParseReport(strings.NewReader(`<testsuites><testsuite><testcase name="a">`), v1alpha1.ReportJUnit)
	g.Expect(err).To(HaveOccurred())
	_, err = ParseReport(strings.NewReader(`<html><body>not a report</body></html>`), v1alpha1.ReportJUnit)
	g.Expect(err).To(MatchError(ContainSubstring("<html>")))
}

// go test -json output of two packages: a failing subtest (its parent
// fails too), a skip, a test that fails then passes on -count rerun is
// counted by its last event, package-level events and output ignored,
// a stderr line mixed in.
const goTestJSON = `{"Action":"start","Package":"example.com/m/a"}
{"Action":"run","Package":"example.com/m/a","Test":"TestParent"}
{"Action":"run","Package":"example.com/m/a","Test":"TestParent/sub_ok"}
{"Action":"pass","Package":"example.com/m/a","Test":"TestParent/sub_ok","Elapsed":0}
{"Action":"run","Package":"example.com/m/a","Test":"TestParent/sub_bad"}
{"Action":"output","Package":"example.com/m/a","Test":"TestParent/sub_bad","Output":"    a_test.go:12: want 1, got 2\n"}
{"Action":"fail","Package":"example.com/m/a","Test":"TestParent/sub_bad","Elapsed":0}
{"Action":"fail","Package":"example.com/m/a","Test":"TestParent","Elapsed":0}
{"Action":"skip","Package":"example.com/m/a","Test":"TestSkipped","Elapsed":0}
{"Action":"fail","Package":"example.com/m/a","Elapsed":0.1}
# example.com/m/b [example.com/m/b.test]
{"Action":"pass","Package":"example.com/m/b","Test":"TestB","Elapsed":0}
{"Action":"pass","Package":"example.com/m/b","Elapsed":0.1}
`

func TestParseGoTestJSON(t *testing.T) {
	g := NewWithT(t)
	s, err := ParseReport(strings.NewReader(goTestJSON), v1alpha1.ReportGoTestJSON)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s).To(Equal(Summary{Passed: 2, Failed: 2, Skipped: 1, Failures: []string{"a.TestParent/sub_bad", "a.TestParent"}}))
}

func TestParseGoTestJSONMalformed(t *testing.T) {
	g := NewWithT(t)
	_, err := ParseReport(strings.NewReader(`{"Action":"pass","Test":"TestA"}`+"\n"+`{"Action":"fail","Test":`), v1alpha1.ReportGoTestJSON)
	g.Expect(err).To(MatchError(ContainSubstring("line 2")))
	_, err = ParseReport(strings.NewReader("ok  example.com/m 0.1s\n"), v1alpha1.ReportGoTestJSON)
	g.Expect(err).To(MatchError(ContainSubstring("no go test -json events")))
}

func TestReportBounds(t *testing.T) {
	g := NewWithT(t)
	// Names are cut to 256 bytes without splitting a character, 16 kept.
	var b strings.Builder
	long := strings.Repeat("é", 200)
	for i := range 20 {
		b.WriteString(`{"Action":"fail","Package":"p","Test":"Test` + string(rune('a'+i)) + long + `"}` + "\n")
	}
	s, err := ParseReport(strings.NewReader(b.String()), v1alpha1.ReportGoTestJSON)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Failed).To(BeEquivalentTo(20))
	g.Expect(s.Failures).To(HaveLen(MaxFailedNames))
	for _, f := range s.Failures {
		g.Expect(len(f)).To(BeNumerically("<=", MaxTestName))
		g.Expect(strings.ToValidUTF8(f, "?")).To(Equal(f))
	}
	// The summary fits a termination message; its count keeps the total.
	enc := s.Encode()
	g.Expect(len(enc)).To(BeNumerically("<=", MaxSummarySize))
	res, why := DecodeSummary(string(enc))
	g.Expect(why).To(BeEmpty())
	g.Expect(res.Failed).To(BeEquivalentTo(20))
	g.Expect(len(res.Failures)).To(BeNumerically(">", 10))

	// A file over the size cap is refused, not cut.
	_, err = ParseReport(strings.NewReader(strings.Repeat(" ", MaxReportSize+1)), v1alpha1.ReportJUnit)
	g.Expect(err).To(MatchError(ContainSubstring("larger than 16 MiB")))
}

func TestReadReportMissingOrMalformed(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	s := ReadReport(filepath.Join(dir, "report.xml"), v1alpha1.ReportJUnit)
	g.Expect(s.Error).To(ContainSubstring("wrote no report at " + filepath.Join(dir, "report.xml")))
	res, why := DecodeSummary(string(s.Encode()))
	g.Expect(res).To(BeNil())
	g.Expect(why).To(ContainSubstring("wrote no report"))

	g.Expect(os.WriteFile(filepath.Join(dir, "bad.xml"), []byte("<testsuites>"), 0o600)).To(Succeed())
	s = ReadReport(filepath.Join(dir, "bad.xml"), v1alpha1.ReportJUnit)
	g.Expect(s.Error).To(ContainSubstring("is not valid JUnit"))

	// A step that crashed leaves its log, not JSON.
	res, why = DecodeSummary("panic: runtime error")
	g.Expect(res).To(BeNil())
	g.Expect(why).To(Equal("the report step failed: panic: runtime error"))
	var m map[string]any
	g.Expect(json.Unmarshal(Summary{Passed: 1}.Encode(), &m)).To(Succeed())
}

func TestFlaky(t *testing.T) {
	g := NewWithT(t)
	images := map[string]string{"api": "sha256:aaa"}
	results := func(failures ...string) *v1alpha1.TestResults {
		return &v1alpha1.TestResults{Passed: 3, Failed: int32(len(failures)), Failures: failures}
	}
	run := func(n int64, img map[string]string, r *v1alpha1.TestResults) v1alpha1.TestRun {
		return v1alpha1.TestRun{Number: n, Result: v1alpha1.ResultFailed, Images: img, Results: r}
	}
	older := []v1alpha1.TestRun{
		run(3, images, results("a.TestRace")),                                            // failed there, passes now
		run(2, map[string]string{"api": "sha256:bbb"}, results("a.TestOld")),             // other digests
		run(1, images, &v1alpha1.TestResults{Failed: 30, Failures: []string{"a.TestX"}}), // incomplete list
	}
	now := run(4, images, results("a.TestTimeout"))
	// TestTimeout failed now, passed in run 3; TestRace the reverse. Run
	// 2's digests differ; run 1's list is incomplete, so TestTimeout
	// missing from it says nothing, and its TestX (not failing now)
	// is compared only against run 4's complete list.
	g.Expect(Flaky(&now, append([]v1alpha1.TestRun{now}, older...))).To(ConsistOf("a.TestTimeout", "a.TestRace", "a.TestX"))

	// Other params ran other tests: no comparison.
	p := run(5, images, results("a.TestTimeout"))
	p.Params = []v1alpha1.EnvVar{{Name: "E2E_FOCUS", Value: "Job"}}
	g.Expect(Flaky(&p, older)).To(BeEmpty())
	// No digests: the code may have changed, a fixed test is not flaky.
	g.Expect(Flaky(&v1alpha1.TestRun{Number: 6, Results: results()}, []v1alpha1.TestRun{run(1, nil, results("a.T"))})).To(BeEmpty())
}

func TestShrinkResults(t *testing.T) {
	g := NewWithT(t)
	var runs []v1alpha1.TestRun
	for n := int64(6); n >= 1; n-- {
		runs = append(runs, v1alpha1.TestRun{Number: n, Result: v1alpha1.ResultFailed,
			Results: &v1alpha1.TestResults{Failed: 1, Failures: []string{"T"}, Flaky: []string{"T"}}})
	}
	runs[0].Result = v1alpha1.ResultRunning
	ShrinkResults(runs)
	g.Expect(runs[1].Results.Flaky).To(Equal([]string{"T"}))
	g.Expect(runs[2].Results.Flaky).To(BeEmpty())
	g.Expect(runs[3].Results.Failures).To(Equal([]string{"T"}))
	g.Expect(runs[4].Results.Failures).To(BeEmpty())
	g.Expect(runs[4].Results.Failed).To(BeEquivalentTo(1))
}

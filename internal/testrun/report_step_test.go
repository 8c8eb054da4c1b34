package testrun

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// The report step waits for its stop, then writes the summary of the
// suite's report, or why there is none, where the kubelet reads it.
func TestHelperTestReportWritesTheSummaryWhenStopped(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	report, msg := filepath.Join(dir, "report.json"), filepath.Join(dir, "termination-log")
	g.Expect(os.WriteFile(report, []byte(`{"Action":"fail","Package":"example.com/m","Test":"TestA"}`+"\n"+
		`{"Action":"pass","Package":"example.com/m","Test":"TestB"}`+"\n"), 0o600)).To(Succeed())

	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- ReportStep(ctx, []string{"--path", report, "--format", "GoTestJSON", "--termination-log", msg})
	}()
	time.Sleep(50 * time.Millisecond)
	g.Expect(msg).NotTo(BeAnExistingFile(), "written only once the test container has exited")
	stop()
	g.Eventually(done).Should(Receive(BeNil()))
	data, err := os.ReadFile(msg)
	g.Expect(err).NotTo(HaveOccurred())
	res, why := DecodeSummary(string(data))
	g.Expect(why).To(BeEmpty())
	g.Expect(*res).To(Equal(v1alpha1.TestResults{Passed: 1, Failed: 1, Failures: []string{"m.TestA"}}))

	// No report: the step still succeeds, its summary says why.
	g.Expect(writeTestReport(filepath.Join(dir, "none.xml"), v1alpha1.ReportJUnit, msg)).To(Succeed())
	data, _ = os.ReadFile(msg)
	res, why = DecodeSummary(string(data))
	g.Expect(res).To(BeNil())
	g.Expect(why).To(ContainSubstring("wrote no report at " + filepath.Join(dir, "none.xml")))
}

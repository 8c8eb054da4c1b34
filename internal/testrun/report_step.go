package testrun

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/pods"
)

// ReportStep is `manager helper test-report`, the report step of a test
// pod (a native sidecar, reportContainer): it waits until the kubelet
// stops it, which it does once the test container has exited, then
// summarises the suite's report file into its termination message, which
// the engine reads back (DecodeSummary): both ends of the format are here. A missing or malformed file is a summary saying
// so, and the step still succeeds: the run's result is the test
// container's exit code either way.
func ReportStep(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("helper test-report", flag.ContinueOnError)
	file := fs.String("path", "", "the report file the suite writes")
	format := fs.String("format", string(v1alpha1.ReportJUnit), "JUnit or GoTestJSON")
	report := fs.String("termination-log", pods.TerminationLog, "where to write the summary")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *file == "" {
		return fmt.Errorf("--path is required")
	}
	<-ctx.Done()
	return writeTestReport(*file, v1alpha1.TestReportFormat(*format), *report)
}

// writeTestReport reads the report at file and writes its summary to out.
func writeTestReport(file string, format v1alpha1.TestReportFormat, out string) error {
	s := ReadReport(file, format)
	if s.Error != "" {
		fmt.Fprintf(os.Stderr, "devloop: no test results: %s\n", s.Error)
	} else {
		fmt.Printf("devloop: %d passed, %d failed, %d skipped\n", s.Passed, s.Failed, s.Skipped)
	}
	return os.WriteFile(out, s.Encode(), 0o644)
}

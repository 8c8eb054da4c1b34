package testrun_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testrun"
	"github.com/devloop-dev/devloop/test/builder"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// TestRunResultsAndFlakyTests: a suite with a JUnit report gets its
// per-test results from the report step's termination message; a second
// run on the same digests where a test that failed now passes flags it
// flaky; a run whose suite wrote no report has no results, says why, and
// still passes by its exit code.
func TestRunResultsAndFlakyTests(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := operatortest.RunnerNamespace(t)
	operatortest.AppFiles(t, ns, operatortest.WebFiles("binary v1"))
	env := operatortest.WebTestsEnv(ns, builder.BuiltSuite("e2e", "web", "ginkgo", "--junit-report=report.xml", "./test/e2e").
		After("web").JUnit("report.xml"))
	g.Expect(operatortest.Admin.Create(ctx, env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)
	operatortest.WaitForEnv(t, key, operatortest.ExpectReadyAndCurrent)

	// Run 1 fails two specs; the Job carries the report step.
	operatortest.Annotate(t, env, v1alpha1.TriggerAnnotation, "e2e")
	operatortest.ExpectRun(t, env, "e2e", 1, v1alpha1.ResultRunning)
	job := operatortest.WaitForJob(t, ns, "web-e2e-1")
	var report *corev1.Container
	for i, c := range job.Spec.Template.Spec.InitContainers {
		if c.Name == testrun.ContainerReport {
			report = &job.Spec.Template.Spec.InitContainers[i]
		}
	}
	g.Expect(report).NotTo(BeNil(), "the report step")
	g.Expect(report.Args).To(ContainElements("test-report", "/workspace/report.xml", "JUnit"))
	operatortest.EndTestJobWithReport(t, job, 1, testrun.Summary{Passed: 3, Failed: 2, Skipped: 1,
		Failures: []string{"Suite.[It] Job: gang", "Suite.[It] Queue: reclaim"}}.Encode())
	env, run := operatortest.ExpectRun(t, env, "e2e", 1, v1alpha1.ResultFailed)
	g.Expect(run.Results).To(Equal(&v1alpha1.TestResults{Passed: 3, Failed: 2, Skipped: 1,
		Failures: []string{"Suite.[It] Job: gang", "Suite.[It] Queue: reclaim"}}))
	g.Expect(run.Message).To(BeEmpty())

	// Run 2, same digests: the gang spec passes now, so it is flaky.
	operatortest.Annotate(t, env, v1alpha1.TriggerAnnotation, "e2e")
	_, run = operatortest.ExpectRun(t, env, "e2e", 2, v1alpha1.ResultRunning)
	g.Expect(run.Images).To(Equal(operatortest.RunOf(env, "e2e", 1).Images))
	g.Expect(run.Images).NotTo(BeEmpty())
	operatortest.EndTestJobWithReport(t, operatortest.WaitForJob(t, ns, "web-e2e-2"), 1, testrun.Summary{Passed: 4, Failed: 1, Skipped: 1,
		Failures: []string{"Suite.[It] Queue: reclaim"}}.Encode())
	env, run = operatortest.ExpectRun(t, env, "e2e", 2, v1alpha1.ResultFailed)
	g.Expect(run.Results.Failures).To(Equal([]string{"Suite.[It] Queue: reclaim"}))
	g.Expect(run.Results.Flaky).To(Equal([]string{"Suite.[It] Job: gang"}))

	// Run 3 writes no report: no results, the message says why, the
	// result follows the exit code.
	operatortest.Annotate(t, env, v1alpha1.TriggerAnnotation, "e2e")
	operatortest.ExpectRun(t, env, "e2e", 3, v1alpha1.ResultRunning)
	operatortest.EndTestJobWithReport(t, operatortest.WaitForJob(t, ns, "web-e2e-3"), 0,
		testrun.Summary{Error: "the suite wrote no report at /workspace/report.xml"}.Encode())
	_, run = operatortest.ExpectRun(t, env, "e2e", 3, v1alpha1.ResultPassed)
	g.Expect(run.Results).To(BeNil())
	g.Expect(run.Message).To(Equal("no test results: the suite wrote no report at /workspace/report.xml"))
}

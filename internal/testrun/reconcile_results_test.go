package testrun_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/internal/testrun"
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
	ns := operatortest.Namespace(t)
	g.Expect(testenv.CreateDeployer(ctx, operatortest.Admin, ns, "runner")).To(Succeed())
	operatortest.AppFiles(t, ns, operatortest.WebFiles("binary v1"))
	env := operatortest.WebEnv(ns)
	env.Spec.ServiceAccountName = "runner"
	env.Spec.Tests = []v1alpha1.TestSuite{{
		Name: "e2e", DependsOn: []string{"web"}, Source: "app", Image: v1alpha1.TestImage{Built: "web"},
		Command: []string{"ginkgo", "--junit-report=report.xml", "./test/e2e"},
		Report:  &v1alpha1.TestReport{Path: "report.xml", Format: v1alpha1.ReportJUnit},
	}}
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
	endTestJobWithReport(t, job, 1, testrun.Summary{Passed: 3, Failed: 2, Skipped: 1,
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
	endTestJobWithReport(t, operatortest.WaitForJob(t, ns, "web-e2e-2"), 1, testrun.Summary{Passed: 4, Failed: 1, Skipped: 1,
		Failures: []string{"Suite.[It] Queue: reclaim"}}.Encode())
	env, run = operatortest.ExpectRun(t, env, "e2e", 2, v1alpha1.ResultFailed)
	g.Expect(run.Results.Failures).To(Equal([]string{"Suite.[It] Queue: reclaim"}))
	g.Expect(run.Results.Flaky).To(Equal([]string{"Suite.[It] Job: gang"}))

	// Run 3 writes no report: no results, the message says why, the
	// result follows the exit code.
	operatortest.Annotate(t, env, v1alpha1.TriggerAnnotation, "e2e")
	operatortest.ExpectRun(t, env, "e2e", 3, v1alpha1.ResultRunning)
	endTestJobWithReport(t, operatortest.WaitForJob(t, ns, "web-e2e-3"), 0,
		testrun.Summary{Error: "the suite wrote no report at /workspace/report.xml"}.Encode())
	_, run = operatortest.ExpectRun(t, env, "e2e", 3, v1alpha1.ResultPassed)
	g.Expect(run.Results).To(BeNil())
	g.Expect(run.Message).To(Equal("no test results: the suite wrote no report at /workspace/report.xml"))
}

// endTestJobWithReport plays the Job controller and kubelet for a test
// Job with a report step: the test container exited with code, the
// report sidecar was stopped after it and left summary as its
// termination message, then the Job's terminal condition.
func endTestJobWithReport(t testing.TB, job *batchv1.Job, code int32, summary []byte) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: job.Name + "-p1", Labels: map[string]string{batchv1.JobNameLabel: job.Name}},
		Spec:       job.Spec.Template.Spec,
	}
	g.Expect(operatortest.Admin.Create(ctx, pod)).To(Succeed())
	pod.Status.Phase = corev1.PodSucceeded
	if code != 0 {
		pod.Status.Phase = corev1.PodFailed
	}
	pod.Status.InitContainerStatuses = []corev1.ContainerStatus{
		operatortest.Terminated(testrun.ContainerFetch, 0, ""), operatortest.Terminated(testrun.ContainerReport, 0, string(summary))}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{operatortest.Terminated(testrun.ContainerTest, code, "")}
	g.Expect(operatortest.Admin.Status().Update(ctx, pod)).To(Succeed())
	operatortest.PodLogs.Set(job.Namespace, pod.Name, testrun.ContainerTest, "Ran 6 of 6 Specs\n")

	g.Eventually(func() error {
		cur := &batchv1.Job{}
		if err := operatortest.Admin.Get(ctx, client.ObjectKeyFromObject(job), cur); err != nil {
			return err
		}
		now := metav1.Now()
		start := metav1.NewTime(now.Add(-3 * time.Second))
		cur.Status.StartTime = &start
		if code == 0 {
			cur.Status.Succeeded = 1
			cur.Status.CompletionTime = &now
			cur.Status.Conditions = []batchv1.JobCondition{
				{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
			}
		} else {
			cur.Status.Failed = 1
			cur.Status.Conditions = []batchv1.JobCondition{
				{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: now},
				{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: now},
			}
		}
		return operatortest.Admin.Status().Update(ctx, cur)
	}, operatortest.Timeout).Should(Succeed())
}

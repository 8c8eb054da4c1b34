package testrun_test

import (
	"context"
	"strings"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testrun"
	"github.com/devloop-dev/devloop/test/builder"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// TestRunsEndInEveryOutcomeAndHistoryIsKept triggers one suite again and
// again with the plain `kubectl annotate devenv tests trigger=unit`, drives
// each run's Job to a different end, and checks what status, events and
// metrics keep, and that Jobs beyond the history limit are deleted.
func TestRunsEndInEveryOutcomeAndHistoryIsKept(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := operatortest.Namespace(t)
	env := operatortest.TestsEnv(t, ns, builder.Suite("unit").Env("E2E_FOCUS", "queue")).HistoryLimit(3).Create(t, operatortest.Admin)
	key := client.ObjectKeyFromObject(env)
	operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		g.Expect(env.Status.Test("unit")).NotTo(BeNil())
		g.Expect(env.Status.Test("unit").Runs).To(BeEmpty(), "nothing runs until asked")
	})
	counted := func(result v1alpha1.TestResult) float64 {
		return testutil.ToFloat64(testrun.RunsTotal.WithLabelValues(ns, "tests", "unit", string(result)))
	}

	// Run 1 passes.
	operatortest.Annotate(t, env, v1alpha1.TriggerAnnotation, "unit")
	env, run := operatortest.ExpectRun(t, env, "unit", 1, v1alpha1.ResultRunning)
	g.Expect(run.JobName).To(Equal("tests-unit-1"))
	g.Expect(run.Trigger).To(Equal("trigger=unit"))
	g.Expect(env.Annotations).NotTo(HaveKey(v1alpha1.TriggerAnnotation), "the request was taken")
	job := operatortest.WaitForJob(t, ns, "tests-unit-1")
	g.Expect(metav1.IsControlledBy(job, env)).To(BeTrue())
	g.Expect(job.Labels).To(HaveKeyWithValue(v1alpha1.LabelSuite, "unit"))
	pod := job.Spec.Template.Spec
	g.Expect(pod.ServiceAccountName).To(Equal(operatortest.Runner))
	g.Expect(pod.Containers[0].Image).To(Equal("busybox:1.36"))
	g.Expect(pod.Containers[0].Env).To(ContainElements(corev1.EnvVar{Name: "E2E_FOCUS", Value: "queue"}, corev1.EnvVar{Name: "DEVLOOP_RUN", Value: "1"}))
	g.Expect(*job.Spec.ActiveDeadlineSeconds).To(Equal(int64(1800)), "the CRD's default timeout")
	g.Expect(job.Spec.Template.Spec.InitContainers).To(BeEmpty(), "no source, no fetch")
	operatortest.ExpectEvent(t, ns, v1alpha1.ReasonTestStarted, "unit #1 started in job tests-unit-1 (trigger=unit)")
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)

	operatortest.EndTestJob(t, job, 0, "", "ok  \tgithub.com/x/y\t0.3s\n")
	env, run = operatortest.ExpectRun(t, env, "unit", 1, v1alpha1.ResultPassed)
	g.Expect(*run.ExitCode).To(BeZero())
	g.Expect(run.LogTail).To(ContainSubstring("ok  \tgithub.com/x/y"))
	g.Expect(run.CompletionTime).NotTo(BeNil())
	g.Expect(env.Status.LastTestResult).To(Equal("unit: Passed"))
	operatortest.ExpectEvent(t, ns, v1alpha1.ReasonTestPassed, "unit #1 Passed after")

	// Run 2 fails with exit code 2; the same plain command starts it.
	operatortest.Annotate(t, env, v1alpha1.TriggerAnnotation, "unit")
	_, _ = operatortest.ExpectRun(t, env, "unit", 2, v1alpha1.ResultRunning)
	long := strings.Repeat("noise\n", 2000) + "--- FAIL: TestQueue (0.01s)\nFAIL\n"
	operatortest.EndTestJob(t, operatortest.WaitForJob(t, ns, "tests-unit-2"), 2, "BackoffLimitExceeded", long)
	env, run = operatortest.ExpectRun(t, env, "unit", 2, v1alpha1.ResultFailed)
	g.Expect(*run.ExitCode).To(Equal(int32(2)))
	g.Expect(len(run.LogTail)).To(BeNumerically("<=", testrun.MaxLogTail))
	g.Expect(run.LogTail).To(HaveSuffix("--- FAIL: TestQueue (0.01s)\nFAIL\n"))
	g.Expect(env.Status.LastTestResult).To(Equal("unit: Failed"))
	operatortest.ExpectEvent(t, ns, v1alpha1.ReasonTestFailed, "(exit code 2): FAIL")

	// Run 3 times out.
	operatortest.Annotate(t, env, v1alpha1.TriggerAnnotation, "unit")
	_, _ = operatortest.ExpectRun(t, env, "unit", 3, v1alpha1.ResultRunning)
	operatortest.EndTestJob(t, operatortest.WaitForJob(t, ns, "tests-unit-3"), 137, batchv1.JobReasonDeadlineExceeded, "still going\n")
	_, run = operatortest.ExpectRun(t, env, "unit", 3, v1alpha1.ResultTimedOut)
	g.Expect(run.Message).To(Equal("did not finish within its timeout of 30m0s"))

	// Run 4 cannot pull its image: Error after the start timeout, and its
	// Job is stopped.
	operatortest.Annotate(t, env, v1alpha1.TriggerAnnotation, "unit")
	_, _ = operatortest.ExpectRun(t, env, "unit", 4, v1alpha1.ResultRunning)
	job4 := operatortest.WaitForJob(t, ns, "tests-unit-4")
	stuck := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tests-unit-4-p1", Labels: map[string]string{batchv1.JobNameLabel: job4.Name}},
		Spec:       job4.Spec.Template.Spec,
	}
	g.Expect(operatortest.Admin.Create(ctx, stuck)).To(Succeed())
	stuck.Status.Phase = corev1.PodPending
	stuck.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: testrun.ContainerTest, State: corev1.ContainerState{
		Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "busybox:1.36"`}}}}
	g.Expect(operatortest.Admin.Status().Update(ctx, stuck)).To(Succeed())
	// The pod's status is no Job event; what the kubelet would change on
	// the Job (status.active) is.
	job4.Status.Active = 1
	g.Expect(operatortest.Admin.Status().Update(ctx, job4)).To(Succeed())
	_, run = operatortest.ExpectRun(t, env, "unit", 4, v1alpha1.ResultError)
	g.Expect(run.Message).To(ContainSubstring(`the pod could not start: ImagePullBackOff: container test: Back-off pulling image "busybox:1.36"`))
	g.Eventually(func(g Gomega) { g.Expect(operatortest.TestJobNames(g, ns)).NotTo(ContainElement("tests-unit-4")) }, operatortest.Timeout).Should(Succeed())

	// Run 5 is cancelled while it runs.
	operatortest.Annotate(t, env, v1alpha1.TriggerAnnotation, "unit")
	_, _ = operatortest.ExpectRun(t, env, "unit", 5, v1alpha1.ResultRunning)
	operatortest.Annotate(t, env, v1alpha1.TriggerAnnotation, "cancel:unit")
	env, run = operatortest.ExpectRun(t, env, "unit", 5, v1alpha1.ResultCancelled)
	g.Expect(run.Message).To(Equal("cancelled by trigger=cancel:unit"))
	g.Expect(operatortest.EnvCondition(env, v1alpha1.ConditionTriggerHandled).Message).To(Equal("trigger=cancel:unit: unit #5 cancelled"))
	operatortest.ExpectEvent(t, ns, v1alpha1.ReasonTestCancelled, "unit #5 Cancelled")

	// History: the limit of 3 keeps runs 5, 4, 3; the Jobs of 1 and 2 are
	// gone, and so are those of the runs stopped (4) and cancelled (5).
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(operatortest.RunNumbers(env, "unit")).To(Equal([]int64{5, 4, 3}))
		g.Expect(operatortest.TestJobNames(g, ns)).To(ConsistOf("tests-unit-3"))
	})
	g.Expect(env.Status.LastTestResult).To(Equal("unit: Cancelled"))
	for result, n := range map[v1alpha1.TestResult]float64{v1alpha1.ResultPassed: 1, v1alpha1.ResultFailed: 1,
		v1alpha1.ResultTimedOut: 1, v1alpha1.ResultError: 1, v1alpha1.ResultCancelled: 1} {
		g.Expect(counted(result)).To(Equal(n), "runs counted as %s", result)
	}
	g.Expect(testutil.CollectAndCount(testrun.RunDuration, "devloop_test_run_duration_seconds")).To(BeNumerically(">=", 1))
	operatortest.ExpectReadyCurrent(t, env)
}

// TestDeletedEnvironmentsMetricsGo: deleting an environment removes its
// test run series from the metrics endpoint; another namespace's
// environment of the same name keeps its own.
func TestDeletedEnvironmentsMetricsGo(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	env := operatortest.ReadyTestsEnv(t, builder.Suite("unit"))
	ns, other := env.Namespace, operatortest.Namespace(t)
	// As the runs of its past would have left them.
	for _, n := range []string{ns, other} {
		testrun.RunsTotal.WithLabelValues(n, env.Name, "unit", string(v1alpha1.ResultPassed)).Inc()
		testrun.RunDuration.WithLabelValues(n, env.Name, "unit").Observe(2)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(testrun.RunsTotal, testrun.RunDuration)
	series := func(namespace string) int {
		families, err := reg.Gather()
		g.Expect(err).NotTo(HaveOccurred())
		n := 0
		for _, f := range families {
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "namespace" && l.GetValue() == namespace {
						n++
					}
				}
			}
		}
		return n
	}
	g.Expect(series(ns)).To(Equal(2))

	g.Expect(operatortest.Admin.Delete(ctx, env)).To(Succeed())
	operatortest.ExpectEnvGone(t, ns, env.Name)
	g.Expect(series(ns)).To(BeZero(), "the deleted environment's series are gone")
	g.Expect(series(other)).To(Equal(2), "another namespace's stay")
}

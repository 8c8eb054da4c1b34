package operatortest

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/internal/testrun"
)

// TestsEnv is an environment of test suites only, run as the ServiceAccount
// "runner", which may do anything in ns.
func TestsEnv(t testing.TB, ns string, suites ...v1alpha1.TestSuite) *v1alpha1.DevEnvironment {
	t.Helper()
	NewWithT(t).Expect(testenv.CreateDeployer(context.Background(), Admin, ns, "runner")).To(Succeed())
	return Env(ns, "tests").ServiceAccount("runner").Tests(suites...).Obj()
}

// Annotate sets a trigger as `kubectl annotate` without --overwrite does:
// refused while the key is there (the operator has not taken the last
// request yet), written with the version read (optimistic concurrency).
func Annotate(t testing.TB, env *v1alpha1.DevEnvironment, annotation, value string) {
	t.Helper()
	NewWithT(t).Expect(TryAnnotate(client.ObjectKeyFromObject(env), annotation, value, Timeout)).To(Succeed())
}

// errBusy: the annotation is still there.
var errBusy = errors.New("the annotation is still there")

// TryAnnotate is one `kubectl annotate` call, retried within the given
// time while refused (key present) or conflicting.
func TryAnnotate(key client.ObjectKey, annotation, value string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		cur := &v1alpha1.DevEnvironment{}
		err := Admin.Get(context.Background(), key, cur)
		if err == nil {
			if _, busy := cur.Annotations[annotation]; !busy {
				if cur.Annotations == nil {
					cur.Annotations = map[string]string{}
				}
				cur.Annotations[annotation] = value
				err = Admin.Update(context.Background(), cur)
				if err == nil {
					return nil
				}
			} else {
				err = errBusy
			}
		}
		// Admin reads from the manager's cache: an object created a moment
		// ago may not be in it yet.
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) && !errors.Is(err, errBusy) {
			return err
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// RunOf is run number n of a suite, or nil.
func RunOf(env *v1alpha1.DevEnvironment, suite string, n int64) *v1alpha1.TestRun {
	return env.Status.Test(suite).Run(n)
}

// RunNumbers are the numbers of a suite's runs in status, newest first.
func RunNumbers(env *v1alpha1.DevEnvironment, suite string) []int64 {
	var out []int64
	if st := env.Status.Test(suite); st != nil {
		for _, r := range st.Runs {
			out = append(out, r.Number)
		}
	}
	return out
}

// ExpectRun waits until run n of suite has the result.
func ExpectRun(t testing.TB, env *v1alpha1.DevEnvironment, suite string, n int64, result v1alpha1.TestResult) (*v1alpha1.DevEnvironment, *v1alpha1.TestRun) {
	t.Helper()
	var run *v1alpha1.TestRun
	env = WaitForEnv(t, client.ObjectKeyFromObject(env), func(g Gomega, env *v1alpha1.DevEnvironment) {
		run = RunOf(env, suite, n)
		g.Expect(run).NotTo(BeNil(), "run %s #%d; runs: %v", suite, n, RunNumbers(env, suite))
		g.Expect(run.Result).To(Equal(result), "run %s #%d: %s", suite, n, run.Message)
		if result == v1alpha1.ResultRunning {
			g.Expect(run.StartTime).NotTo(BeNil(), "a running run's Job was created")
		}
	})
	return env, run
}

// EndTestJob plays the Job controller and kubelet for a test Job: a pod
// whose test container exited with code (with log), then the terminal
// condition (Complete for 0, Failed with reason otherwise).
func EndTestJob(t testing.TB, job *batchv1.Job, code int32, reason, log string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: job.Name + "-p1", Labels: map[string]string{batchv1.JobNameLabel: job.Name}},
		Spec:       job.Spec.Template.Spec,
	}
	g.Expect(Admin.Create(ctx, pod)).To(Succeed())
	pod.Status.Phase = corev1.PodSucceeded
	if code != 0 {
		pod.Status.Phase = corev1.PodFailed
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{Terminated(testrun.ContainerTest, code, "")}
	g.Expect(Admin.Status().Update(ctx, pod)).To(Succeed())
	PodLogs.Set(job.Namespace, pod.Name, testrun.ContainerTest, log)

	g.Eventually(func() error {
		cur := &batchv1.Job{}
		if err := Admin.Get(ctx, client.ObjectKeyFromObject(job), cur); err != nil {
			return err
		}
		now := metav1.Now()
		start := metav1.NewTime(now.Add(-3 * time.Second))
		cur.Status.StartTime = &start
		if reason == "" {
			cur.Status.Succeeded = 1
			cur.Status.CompletionTime = &now
			cur.Status.Conditions = []batchv1.JobCondition{
				{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
			}
		} else {
			cur.Status.Failed = 1
			cur.Status.Conditions = []batchv1.JobCondition{
				{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: reason, LastTransitionTime: now},
				{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: reason, LastTransitionTime: now},
			}
		}
		return Admin.Status().Update(ctx, cur)
	}, Timeout).Should(Succeed())
}

// TestJobNames lists the test Jobs in ns that are not being deleted.
func TestJobNames(g Gomega, ns string) []string {
	list := &batchv1.JobList{}
	g.Expect(Admin.List(context.Background(), list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelRole: v1alpha1.RoleTest})).To(Succeed())
	var out []string
	for _, j := range list.Items {
		if j.DeletionTimestamp == nil {
			out = append(out, j.Name)
		}
	}
	return out
}

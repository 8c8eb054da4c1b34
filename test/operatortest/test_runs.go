package operatortest

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

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

// AnnotateOverwrite sets an annotation as `kubectl annotate --overwrite`
// does, whether or not it is there: how a token trigger is renewed, or a
// crash between the trigger protocol's writes is played.
func AnnotateOverwrite(t testing.TB, key client.ObjectKey, annotation, value string) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		cur := &v1alpha1.DevEnvironment{}
		if err := Admin.Get(context.Background(), key, cur); err != nil {
			return err
		}
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Annotations[annotation] = value
		return Admin.Update(context.Background(), cur)
	}, Timeout).Should(Succeed())
}

// WaitForTriggerRefused waits until TriggerHandled is False for reason
// and check passes, and returns the environment.
func WaitForTriggerRefused(t testing.TB, key client.ObjectKey, reason string, check func(g Gomega, env *v1alpha1.DevEnvironment)) *v1alpha1.DevEnvironment {
	t.Helper()
	return WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		c := EnvCondition(env, v1alpha1.ConditionTriggerHandled)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(reason))
		check(g, env)
	})
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

package controllers

import (
	"errors"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/internal/testenv"
)

func TestResultFor(t *testing.T) {
	g := NewWithT(t)

	res, err := resultFor(nil, 0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.RequeueAfter).To(BeZero())

	res, err = resultFor(&fault.StalledError{Reason: "X", Err: errors.New("bad spec")}, 0)
	g.Expect(err).NotTo(HaveOccurred(), "a stalled environment waits for a spec change, not a backoff")
	g.Expect(res.RequeueAfter).To(BeZero())

	res, err = resultFor(&fault.WaitingError{Err: errors.New("rolling out"), RequeueAfter: time.Second}, 0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.RequeueAfter).To(Equal(time.Second))

	res, err = resultFor(&fault.WaitingError{Err: errors.New("rolling out")}, 0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.RequeueAfter).To(Equal(defaultWaitInterval))

	_, err = resultFor(errors.New("connection refused"), 0)
	g.Expect(err).To(MatchError("connection refused"), "transient errors go to controller-runtime's backoff")
}

// TestSummarizeConformsToKstatus drives summarize through every outcome and
// checks the invariants and what kstatus makes of the result.
func TestSummarizeConformsToKstatus(t *testing.T) {
	cases := []struct {
		name       string
		suspend    bool
		outcome    error
		ready      metav1.ConditionStatus
		reason     string
		stalled    bool
		reconciled bool
		kstatus    status.Status
	}{
		{"success", false, nil, metav1.ConditionTrue, v1alpha1.ReasonSucceeded, false, false, status.CurrentStatus},
		{"cycle", false, &fault.StalledError{Reason: v1alpha1.ReasonDependencyCycle, Err: errors.New("dependency cycle: a -> b -> a")},
			metav1.ConditionFalse, v1alpha1.ReasonDependencyCycle, true, false, status.FailedStatus},
		{"waiting", false, &fault.WaitingError{Reason: v1alpha1.ReasonProgressing, Err: errors.New("1 of 2 components not Ready")},
			metav1.ConditionFalse, v1alpha1.ReasonProgressing, false, true, status.InProgressStatus},
		{"transient", false, errors.New("timeout"), metav1.ConditionFalse, v1alpha1.ReasonReconcileError, false, true, status.InProgressStatus},
		{"suspended before any reconcile", true, nil, metav1.ConditionUnknown, v1alpha1.ReasonSuspended, false, false, status.InProgressStatus},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			env := &v1alpha1.DevEnvironment{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "n", Generation: 3}}
			env.Spec.Suspend = tc.suspend
			// Start from the opposite state, so stale conditions must be cleared.
			setCondition(env, v1alpha1.ConditionStalled, metav1.ConditionTrue, "Old", "old")
			setCondition(env, v1alpha1.ConditionReconciling, metav1.ConditionTrue, "Old", "old")
			if tc.suspend {
				env.Status.Conditions = nil
			}
			summarize(env, tc.outcome)

			ready := meta.FindStatusCondition(env.Status.Conditions, v1alpha1.ConditionReady)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(tc.ready))
			g.Expect(ready.Reason).To(Equal(tc.reason))
			g.Expect(meta.FindStatusCondition(env.Status.Conditions, v1alpha1.ConditionStalled) != nil).To(Equal(tc.stalled))
			g.Expect(meta.FindStatusCondition(env.Status.Conditions, v1alpha1.ConditionReconciling) != nil).To(Equal(tc.reconciled))
			res, err := testenv.Kstatus(env)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.Status).To(Equal(tc.kstatus), res.Message)
		})
	}
}

// TestRolloutPollBacksOff: a rollout that just started is looked at again
// within minRolloutPoll, one that has waited long at WaitInterval.
func TestRolloutPollBacksOff(t *testing.T) {
	now := time.Now()
	r := &DevEnvironmentReconciler{WaitInterval: 5 * time.Second}
	at := func(ready metav1.ConditionStatus, since time.Duration) time.Duration {
		env := &v1alpha1.DevEnvironment{}
		env.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: ready,
			LastTransitionTime: metav1.NewTime(now.Add(-since))}}
		return r.rolloutPoll(&scope{env: env, before: env, read: env}, now)
	}
	for _, c := range []struct {
		ready metav1.ConditionStatus
		since time.Duration
		want  time.Duration
	}{
		{metav1.ConditionTrue, time.Hour, minRolloutPoll}, // this reconcile started the rollout
		{metav1.ConditionFalse, 0, minRolloutPoll},
		{metav1.ConditionFalse, 2 * time.Second, minRolloutPoll},
		{metav1.ConditionFalse, 6 * time.Second, 1500 * time.Millisecond},
		{metav1.ConditionFalse, 8 * time.Second, 2 * time.Second},
		{metav1.ConditionFalse, time.Minute, 5 * time.Second},
	} {
		if got := at(c.ready, c.since); got != c.want {
			t.Errorf("Ready=%s for %s: poll after %s, want %s", c.ready, c.since, got, c.want)
		}
	}
	if got := (&DevEnvironmentReconciler{}).rolloutPoll(&scope{env: &v1alpha1.DevEnvironment{}, before: &v1alpha1.DevEnvironment{}, read: &v1alpha1.DevEnvironment{}}, now); got != minRolloutPoll {
		t.Errorf("no Ready condition yet: %s, want %s", got, minRolloutPoll)
	}
}

package controllers

import (
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/fault"
)

// TestWaitingRetriesOnABoundedSchedule (issue 43 item 1): a dependency
// that is down (fault.Unavailable) or a Waiting reason is looked at again
// on the environment's own schedule — no error for controller-runtime's
// backoff, which grew to minutes — between waitRetryMin and waitRetryMax
// however long the wait has lasted, and never sooner as it lasts longer.
func TestWaitingRetriesOnABoundedSchedule(t *testing.T) {
	g := NewWithT(t)
	outcomes := map[string]error{
		"registry down": fault.Unavailable(errors.New("registry unavailable: 503")),
		"wrapped":       componentErrors{errors.New("a: failed"), fault.Unavailable(errors.New("b: connection refused"))},
		"waiting":       &fault.WaitingError{Reason: v1alpha1.ReasonWaiting, Err: errors.New("tag does not resolve yet")},
	}
	for name, outcome := range outcomes {
		for _, waited := range []time.Duration{0, time.Second, 30 * time.Second, 5 * time.Minute, 10 * time.Hour} {
			res, err := resultFor(outcome, waited)
			g.Expect(err).NotTo(HaveOccurred(), "%s after %s: a wait is not a reconcile error", name, waited)
			g.Expect(res.RequeueAfter).To(BeNumerically(">=", waitRetryMin), "%s after %s", name, waited)
			g.Expect(res.RequeueAfter).To(BeNumerically("<=", waitRetryMax), "%s after %s", name, waited)
		}
	}
}

// TestWaitRetryArithmetic: the schedule grows with the wait, is jittered
// around its base (environments that went down together do not retry
// together) and is capped.
func TestWaitRetryArithmetic(t *testing.T) {
	g := NewWithT(t)
	g.Expect(waitRetry(0, 0)).To(Equal(waitRetryMin))
	g.Expect(waitRetry(time.Hour, 1)).To(BeNumerically("~", waitRetryMax, time.Millisecond))
	g.Expect(waitRetry(time.Hour, 0)).To(BeNumerically("<", waitRetry(time.Hour, 1)), "jittered")
	prev := time.Duration(0)
	for waited := time.Duration(0); waited < 10*time.Minute; waited += 7 * time.Second {
		next := waitRetry(waited, 0.5)
		g.Expect(next).To(BeNumerically(">=", prev), "never sooner as the wait lasts: after %s", waited)
		g.Expect(next).To(BeNumerically("<=", waitRetryMax))
		prev = next
	}
	g.Expect(prev).To(BeNumerically(">", 20*time.Second), "a long wait backs off towards the cap")
}

package engine

import (
	"time"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// Result is what an engine reports of one request, and, merged, what a
// whole reconcile decided about when to look again.
type Result struct {
	// Phase is the component's phase after the engine ran; "" leaves it
	// to the next engine (an image built, a live update done).
	Phase v1alpha1.ComponentPhase
	// Message says why, in words for `kubectl get`.
	Message string
	// RequeueAfter is the soonest something must be looked at again even
	// if nothing changes (a branch or base tag to resolve again, a push to
	// verify, a pod that cannot pull); zero is never.
	RequeueAfter time.Duration
	// Poll is set when the engine waits for what no event reports (a
	// rollout, a warm builder pod starting): the reconciler polls soon.
	Poll bool
}

// MinRequeue is the soonest a requeue is asked for: sooner only spins.
const MinRequeue = time.Second

// ConflictRetry is how soon a reconcile whose write lost a race (the
// cache had not seen the newest version yet) looks again: a stale read,
// not a failure.
const ConflictRetry = 200 * time.Millisecond

// RequeueWithin asks for a look no later than d from now (never sooner
// than MinRequeue).
func (r *Result) RequeueWithin(d time.Duration) {
	r.soonest(max(d, MinRequeue))
}

// RetrySoon asks for another look shortly (ConflictRetry): a write lost
// a race with a newer version.
func (r *Result) RetrySoon() {
	r.soonest(ConflictRetry)
}

func (r *Result) soonest(d time.Duration) {
	if r.RequeueAfter == 0 || d < r.RequeueAfter {
		r.RequeueAfter = d
	}
}

// Merge folds o into r: the soonest requeue, polling if either polls,
// and o's phase and message when it sets one.
func (r *Result) Merge(o Result) {
	if o.RequeueAfter > 0 {
		r.soonest(o.RequeueAfter)
	}
	r.Poll = r.Poll || o.Poll
	if o.Phase != "" {
		r.Phase, r.Message = o.Phase, o.Message
	}
}

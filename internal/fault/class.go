package fault

import (
	"time"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// Class is what an engine's error is at the engine boundary, where the
// reconciler turns it into conditions and a requeue: source-controller's
// two classes, Stalling and Waiting, and neither (retried with backoff).
// The kinds above (Permanent, Unavailable, Stalled, Waiting) are how an
// engine says it; Classify is the one place they become a class.
type Class int

const (
	// Settled: no error.
	Settled Class = iota
	// Stalling: a human must change something (Stalled; a Permanent error
	// once its engine stalls on it, StallPermanent). Not requeued.
	Stalling
	// Waiting: something heals by itself or work is under way (Waiting,
	// Unavailable). Looked at again without counting as a failure.
	Waiting
	// Retrying: anything else, retried with backoff.
	Retrying
)

// Outcome is an error's class and what the class needs of it.
type Outcome struct {
	Class Class
	// Reason is the condition reason (Stalled's or Reconciling's); empty
	// when Settled or Retrying.
	Reason string
	// After is a wait's interval (0: the wait schedule, or the default).
	After time.Duration
	// Outside: a wait on something outside that heals by itself (a
	// dependency down, a tag not pushed yet), looked at again on the wait
	// schedule; otherwise work in flight, after its interval.
	Outside bool
	// RetryingDependency: Unavailable with no WaitingError around it,
	// which status says is retried ("retrying: …").
	RetryingDependency bool
	// DependencyDown: err is, or wraps, Unavailable, whatever its class.
	DependencyDown bool
}

// Classify reads err, in this order: a stall wins over any wait it wraps,
// a WaitingError over the Unavailable it wraps.
func Classify(err error) Outcome {
	if err == nil {
		return Outcome{Class: Settled}
	}
	down := IsUnavailable(err)
	if s := AsStalled(err); s != nil {
		return Outcome{Class: Stalling, Reason: s.Reason, DependencyDown: down}
	}
	if w := AsWaiting(err); w != nil {
		outside := w.Reason == v1alpha1.ReasonWaiting && w.RequeueAfter <= 0
		return Outcome{Class: Waiting, Reason: w.Reason, After: w.RequeueAfter, Outside: outside, DependencyDown: down}
	}
	if down {
		return Outcome{Class: Waiting, Reason: v1alpha1.ReasonWaiting, Outside: true, RetryingDependency: true, DependencyDown: true}
	}
	return Outcome{Class: Retrying}
}

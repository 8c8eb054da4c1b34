package controllers

import (
	"time"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/fault"
)

// What an engine's error says, at the engine boundary, is one of a few
// classes (source-controller's Stalling and Waiting, with devloop's
// waits on something outside), read in this one place: summarize turns
// the class into conditions, resultFor into a requeue, the transitions
// into an event, the component walk into a phase. Nothing else in
// controllers looks into a fault (test/layout checks), so an engine
// reporting through internal/fault cannot be read two ways.

// outcomeClass is what retrying can do about an outcome.
type outcomeClass int

const (
	// settled: no error.
	settled outcomeClass = iota
	// stalling: a human must change something (fault.Stalled); Stalled,
	// not requeued.
	stalling
	// waitingOutside: something outside heals by itself (fault.Unavailable,
	// or a WaitingError of reason Waiting without an interval); Reconciling,
	// looked at again on the wait schedule.
	waitingOutside
	// progressing: work in flight (any other WaitingError); Reconciling,
	// looked at again after its interval.
	progressing
	// retrying: anything else; Reconciling, retried with backoff.
	retrying
)

// outcome is an error's class and what the class needs of it.
type outcome struct {
	class outcomeClass
	// reason is the condition reason (Stalled's or Reconciling's); empty
	// for settled and retrying.
	reason string
	// after is a progressing outcome's interval (0: the default).
	after time.Duration
	// retryingDependency: a waitingOutside outcome of a dependency down
	// (fault.Unavailable, no WaitingError around it), which status says
	// is retried ("retrying: …").
	retryingDependency bool
	// dependencyDown: err is, or wraps, fault.Unavailable, whatever its
	// class: a component waiting on it is Building, not Failed.
	dependencyDown bool
}

// classify reads err through fault.Classify, the one place an engine's
// kinds become the boundary's classes, and splits its waits by what the
// reconciler does with them.
func classify(err error) outcome {
	o := fault.Classify(err)
	out := outcome{reason: o.Reason, retryingDependency: o.RetryingDependency, dependencyDown: o.DependencyDown}
	switch {
	case o.Class == fault.Settled:
		out.class = settled
	case o.Class == fault.Stalling:
		out.class = stalling
	case o.Class == fault.Waiting && o.Outside:
		out.class = waitingOutside
	case o.Class == fault.Waiting:
		out.class, out.after = progressing, o.After
	default:
		out.class = retrying
	}
	return out
}

// classifyComponent is classify for a component's failure among others:
// a permanent error the engine did not stall on still stalls the walk
// (as the deploy engine's reason) rather than retrying it.
func classifyComponent(err error) outcome {
	return classify(fault.StallPermanent(v1alpha1.ReasonDeployFailed, err))
}

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

// classify reads err, in this order: Stalled wins over any wait it wraps,
// a WaitingError over the Unavailable it wraps.
func classify(err error) outcome {
	if err == nil {
		return outcome{class: settled}
	}
	down := fault.IsUnavailable(err)
	if s := fault.AsStalled(err); s != nil {
		return outcome{class: stalling, reason: s.Reason, dependencyDown: down}
	}
	if w := fault.AsWaiting(err); w != nil {
		if w.Reason == v1alpha1.ReasonWaiting && w.RequeueAfter <= 0 {
			return outcome{class: waitingOutside, reason: w.Reason, dependencyDown: down}
		}
		return outcome{class: progressing, reason: w.Reason, after: w.RequeueAfter, dependencyDown: down}
	}
	if down {
		return outcome{class: waitingOutside, reason: v1alpha1.ReasonWaiting, retryingDependency: true, dependencyDown: true}
	}
	return outcome{class: retrying}
}

// classifyComponent is classify for a component's failure among others:
// a permanent error the engine did not stall on still stalls the walk
// (as the deploy engine's reason) rather than retrying it.
func classifyComponent(err error) outcome {
	return classify(fault.StallPermanent(v1alpha1.ReasonDeployFailed, err))
}

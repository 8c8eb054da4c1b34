package controllers

import (
	"errors"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

// StallingError means work cannot go on until the spec or the cluster
// changes: the environment is Stalled and is not requeued (a spec change
// triggers the next reconcile).
type StallingError struct {
	Reason string
	Err    error
}

func (e *StallingError) Error() string { return e.Err.Error() }
func (e *StallingError) Unwrap() error { return e.Err }

// WaitingError means work is under way elsewhere (a rollout, a dependency):
// the environment is Reconciling and is looked at again after RequeueAfter.
type WaitingError struct {
	Reason       string
	Err          error
	RequeueAfter time.Duration
}

func (e *WaitingError) Error() string { return e.Err.Error() }
func (e *WaitingError) Unwrap() error { return e.Err }

// defaultWaitInterval is how soon a waiting environment is looked at again.
const defaultWaitInterval = 5 * time.Second

// resultFor maps the outcome of the steps to what controller-runtime does
// next. It is the only place that decides requeueing:
//   - nil: done; look again only on change.
//   - *StallingError: done until the spec changes; no backoff storm.
//   - *WaitingError: requeue after its interval, without counting as failure.
//   - anything else: return it, so controller-runtime retries with backoff.
func resultFor(err error) (ctrl.Result, error) {
	var stalling *StallingError
	var waiting *WaitingError
	switch {
	case err == nil:
		return ctrl.Result{}, nil
	case errors.As(err, &stalling):
		// The status says Stalled; returning the error would only add a
		// backoff loop that cannot succeed.
		return ctrl.Result{}, nil
	case errors.As(err, &waiting):
		after := waiting.RequeueAfter
		if after <= 0 {
			after = defaultWaitInterval
		}
		return ctrl.Result{RequeueAfter: after}, nil
	default:
		return ctrl.Result{}, err
	}
}

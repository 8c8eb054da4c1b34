package controllers

import (
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/devloop-dev/devloop/internal/fault"
)

// defaultWaitInterval is how soon a waiting environment is looked at again.
const defaultWaitInterval = 5 * time.Second

// resultFor maps the outcome of the steps to what controller-runtime does
// next. It is the only place that decides requeueing:
//   - nil: done; look again only on change.
//   - *fault.StalledError: done until the spec changes; no backoff storm.
//   - *fault.WaitingError: requeue after its interval, without counting as
//     failure.
//   - anything else: return it, so controller-runtime retries with backoff.
func resultFor(err error) (ctrl.Result, error) {
	switch {
	case err == nil:
		return ctrl.Result{}, nil
	case fault.AsStalled(err) != nil:
		// The status says Stalled; returning the error would only add a
		// backoff loop that cannot succeed.
		return ctrl.Result{}, nil
	case fault.AsWaiting(err) != nil:
		after := fault.AsWaiting(err).RequeueAfter
		if after <= 0 {
			after = defaultWaitInterval
		}
		return ctrl.Result{RequeueAfter: after}, nil
	default:
		return ctrl.Result{}, err
	}
}

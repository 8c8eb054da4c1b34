package controllers

import (
	"math/rand/v2"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

// defaultWaitInterval is how soon an environment waiting on work in
// flight (a rollout, a build) is looked at again.
const defaultWaitInterval = 5 * time.Second

// resultFor maps the outcome of the steps to what controller-runtime does
// next. It is the only place that decides requeueing:
//   - nil: done; look again only on change.
//   - *fault.StalledError: done until the spec changes; no backoff storm.
//   - a wait on something outside (fault.Unavailable: a registry down; a
//     WaitingError with reason Waiting: a tag that does not resolve yet):
//     looked at again on the wait schedule (waitRetry), with no error.
//     Returned as an error it was retried by controller-runtime's backoff,
//     which grows to minutes (a registry back for 116 s before a build
//     went on) and logs every try as an ERROR.
//   - *fault.WaitingError: requeue after its interval, without counting as
//     failure.
//   - anything else: return it, so controller-runtime retries with backoff.
//
// waited is how long the environment has not been Ready.
func resultFor(err error, waited time.Duration) (ctrl.Result, error) {
	switch o := classify(err); o.class {
	case settled:
		return ctrl.Result{}, nil
	case stalling:
		// The status says Stalled; returning the error would only add a
		// backoff loop that cannot succeed.
		return ctrl.Result{}, nil
	case waitingOutside:
		return ctrl.Result{RequeueAfter: waitRetry(waited, rand.Float64())}, nil
	case progressing:
		after := o.after
		if after <= 0 {
			after = defaultWaitInterval
		}
		return ctrl.Result{RequeueAfter: after}, nil
	default:
		return ctrl.Result{}, err
	}
}

// isWait reports whether err is a wait on something outside the operator
// that heals by itself: a dependency down (fault.Unavailable), or a
// WaitingError with reason Waiting and no interval of its own. Any engine
// reporting either gets the wait schedule, its log line and its event.
func isWait(err error) bool { return classify(err).class == waitingOutside }

// The wait schedule's bounds: a first retry soon (DNS catching up, a
// registry restarting), and never more than waitRetryMax between tries,
// so an environment heals within about that of its dependency's return,
// however long the outage lasted.
const (
	waitRetryMin = 2 * time.Second
	waitRetryMax = 30 * time.Second
)

// waitRetry is how soon to look again after waiting for waited: a quarter
// of the wait so far, jittered by ±20% (jitter in [0, 1]) so environments
// that lost their registry together do not all retry together, between
// waitRetryMin and waitRetryMax.
func waitRetry(waited time.Duration, jitter float64) time.Duration {
	base := min(max(waited/4, waitRetryMin), waitRetryMax*5/6)
	after := time.Duration(float64(base) * (0.8 + 0.4*jitter))
	return min(max(after, waitRetryMin), waitRetryMax)
}

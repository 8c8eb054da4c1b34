package helm

import (
	"context"
	"fmt"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// A Helm action can take minutes: Helm waits for hook Jobs (a pre-install
// migration, a test image pulled slowly, a hook in backoff) up to the
// release's timeout. Run inside the reconcile, it held the environment's
// reconcile for all that time, so a push's new source revision was not
// even acknowledged until it ended. So an action that is not over within
// helmAttachWait goes on outside the reconcile: the reconcile reports the
// component Deploying (Reconciling stays True, kstatus InProgress) and
// ends; later reconciles see the action in flight and leave the release
// alone; when it ends the environment is woken and the next reconcile
// takes its outcome as if it had waited for it.

// helmAttachWait is how long a reconcile waits for a Helm action before
// leaving it to run on its own. Most actions (no hooks, nothing to wait
// for) end well within it, and their reconcile goes on to readiness as
// before.
const helmAttachWait = time.Second

// helmActionBound bounds a detached action: ReconcileRelease may take a
// few actions in a row (uninstall a failed install, then install), each
// within the release's timeout.
func helmActionBound(timeout time.Duration) time.Duration {
	if timeout <= 0 {
		timeout = defaultActionTimeout
	}
	return 2*timeout + time.Minute
}

// helmActions are an operator's Helm actions, one at most per release
// (Releases.inFlight).
type helmActions struct {
	mu   sync.Mutex
	runs map[string]*Run
	wake chan event.GenericEvent
}

// newHelmActions has room for 64 wakes not yet taken: a full channel
// drops one (see notify).
func newHelmActions() *helmActions {
	return &helmActions{runs: map[string]*Run{}, wake: make(chan event.GenericEvent, 64)}
}

// Run is one ReconcileRelease call in flight, or ended.
type Run struct {
	digest  string
	started time.Time
	env     client.ObjectKey
	cancel  context.CancelFunc
	done    chan struct{}
	// out and err are set before done is closed.
	out Outcome
	err error
	// ended is when done was closed.
	ended time.Time

	mu sync.Mutex
	// attached says a reconcile still waits for the call: BeforeAction is
	// forwarded (status is the reconcile's to write) only then.
	attached bool
	// action is the action under way ("" before the first).
	action Action
}

// ReleaseKey names a release of an owner (an environment's UID) among the
// actions in flight.
func ReleaseKey(owner, namespace, name string) string {
	return owner + "/" + namespace + "/" + name
}

// Result is the ended call's outcome and error.
func (r *Run) Result() (Outcome, error) { return r.out, r.err }

// Started is when the call started.
func (r *Run) Started() time.Time { return r.started }

// pending says a run for key is in flight or ended without its outcome
// taken by a reconcile yet.
func (a *helmActions) pending(key string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.runs[key]
	return ok
}

func (a *helmActions) pendingDigest(key string) (string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if r, ok := a.runs[key]; ok {
		return r.digest, true
	}
	return "", false
}

// reconcile runs ReconcileRelease for req, or takes the outcome of the
// run already under way. It returns done=false while the run is in flight
// (run says what it does), or the ended run, whose out and err are the
// call's. A finished run for other chart and values than req's is dropped
// and req runs anew.
func (a *helmActions) reconcile(ctx context.Context, key string, env client.ObjectKey, req ReleaseRequest,
	reconcileRelease func(context.Context, ReleaseRequest) (Outcome, error)) (run *Run, done bool) {
	digest := releaseDigest(req)
	a.mu.Lock()
	if r := a.runs[key]; r != nil {
		select {
		case <-r.done:
			delete(a.runs, key)
			if r.digest == digest {
				a.mu.Unlock()
				return r, true
			}
			// Not silently: a failed action for an earlier request
			// would otherwise leave no trace.
			log.FromContext(ctx).Info("a Helm action for an earlier request of this release ended; the current request runs anew",
				"release", key, "action", r.current(), "failed", r.err != nil, "error", errText(r.err))
		default:
			a.mu.Unlock()
			return r, false
		}
	}
	a.dropStale()
	// The action outlives the reconcile: it keeps the reconcile's logger,
	// not its deadline.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), helmActionBound(req.Timeout))
	r := &Run{digest: digest, started: time.Now(), env: env, cancel: cancel, done: make(chan struct{}), attached: true}
	a.runs[key] = r
	a.mu.Unlock()

	forward := req.BeforeAction
	req.BeforeAction = func(act Action) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.action = act
		if r.attached && forward != nil {
			forward(act)
		}
	}
	go func() {
		defer cancel()
		o, err := reconcileRelease(actx, req)
		r.out, r.err, r.ended = o, err, time.Now()
		close(r.done)
		r.mu.Lock()
		detached := !r.attached
		r.mu.Unlock()
		if detached {
			a.notify(r.env)
		}
	}()

	timer := time.NewTimer(helmAttachWait)
	defer timer.Stop()
	select {
	case <-r.done:
	case <-timer.C:
	case <-ctx.Done():
	}
	r.mu.Lock()
	r.attached = false
	r.mu.Unlock()
	select {
	case <-r.done:
		a.take(key, r)
		return r, true
	default:
		return r, false
	}
}

// take forgets r once its outcome is consumed.
func (a *helmActions) take(key string, r *Run) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.runs[key] == r {
		delete(a.runs, key)
	}
}

// dropStale forgets runs that ended long ago and were never taken (their
// component moved its release, or was removed). a.mu is held.
func (a *helmActions) dropStale() {
	for k, r := range a.runs {
		select {
		case <-r.done:
			if time.Since(r.ended) > time.Hour {
				delete(a.runs, k)
			}
		default:
		}
	}
}

// notify wakes env's controller; a full channel drops the wake, and the
// environment's poll of a component in flight finds the outcome instead.
func (a *helmActions) notify(env client.ObjectKey) {
	obj := &v1alpha1.DevEnvironment{}
	obj.Namespace, obj.Name = env.Namespace, env.Name
	select {
	case a.wake <- event.GenericEvent{Object: obj}:
	default:
	}
}

// stop cancels the action in flight on a release (its environment is
// deleted, or the release moved) and waits a little for it to end; an
// error says it has not, so the caller tries again later.
func (a *helmActions) stop(key string) error {
	a.mu.Lock()
	r := a.runs[key]
	a.mu.Unlock()
	if r == nil {
		return nil
	}
	r.cancel()
	select {
	case <-r.done:
		a.take(key, r)
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("a helm %s of the release is still stopping", r.current())
	}
}

// current is the action under way, for messages.
func (r *Run) current() Action {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.action == "" {
		return "check"
	}
	return r.action
}

// InFlightMessage says what the run does and for how long, for status.
func (r *Run) InFlightMessage(namespace, name string) string {
	return fmt.Sprintf("helm %s of release %s/%s in progress for %s", r.current(), namespace, name,
		time.Since(r.started).Round(time.Second))
}

// errText is err's message, or "" for none.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

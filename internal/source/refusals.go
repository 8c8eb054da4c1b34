package source

import (
	"context"
	"errors"
	"net"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/devloop-dev/devloop/internal/fault"
)

// A refused fetch is remembered (issue 32): a source refused for its
// content (over the size cap, an unsafe archive, not an artifact), for
// its origin's answer (not found) or for room in the store is not
// downloaded again on every reconcile. The entry's key is the content and
// its origin, so a changed source (a new digest or commit) is a new key
// and fetched at once; the same one is tried again only after a backoff,
// and a refusal for room only once it would fit. Each refusal is logged
// when it happens, not when it is answered again from memory.

// refusal is what is remembered of a refused fetch of one entry.
type refusal struct {
	err error
	// subject is whom err names; another environment naming the same
	// content under another source name gets the same refusal in its
	// own words (answer).
	subject subject
	// size is the entry's size when it was refused for room (-1
	// otherwise): it is admitted again, without a download, once it fits.
	size int64
	// group is whose share refused it for room.
	group string
	// retry is when it may be fetched again; tries how often it was.
	retry time.Time
	tries int
}

// Backoffs of a remembered refusal: a permanent one, and a fetch cut by
// its deadline (a tarpit source holds a worker once per backoff, not on
// every reconcile).
const (
	refusalBackoff    = 5 * time.Minute
	maxRefusalBackoff = time.Hour
	slowBackoff       = time.Minute
	maxSlowBackoff    = 15 * time.Minute
	// maxRefusals bounds the memory; the oldest go first.
	maxRefusals = 4096
)

// refused returns the remembered refusal of entry name for env, in s's
// words, nil when it may be fetched.
func (f *Fetcher) refused(s subject, name string, env types.UID) error {
	st := f.state()
	st.mu.Lock()
	defer st.mu.Unlock()
	r := st.refusals[name]
	if r == nil {
		return nil
	}
	if r.size >= 0 {
		// Refused for room: fetched again once it fits what is in use,
		// for whoever asks.
		if f.wouldFit(st, name, r.size, st.group(env)) {
			return nil
		}
		return r.answer(s)
	}
	if time.Now().Before(r.retry) {
		return r.answer(s)
	}
	return nil
}

// answer is the refusal as s says it: the error itself for the subject
// that was refused, the same message and class under s's name otherwise.
func (r *refusal) answer(s subject) error {
	if s == r.subject {
		return r.err
	}
	msg := strings.TrimPrefix(r.err.Error(), r.subject.String()+": ")
	if fault.IsPermanent(r.err) {
		return s.permanent("%s", msg)
	}
	return s.unavailable("%s", msg)
}

// remember records the failed fetch of entry name and returns err: a
// permanent refusal, a refusal for room (size known, else -1) and a fetch
// cut by its deadline are remembered; anything else is the reconciler's
// to retry.
func (f *Fetcher) remember(ctx context.Context, s subject, name string, env types.UID, err error, size int64) error {
	var denied *accessFailure
	if errors.As(err, &denied) {
		// The asker's own: another may be granted the content.
		return err
	}
	deadline := cutByDeadline(ctx, err) && !fault.IsPermanent(err)
	if !fault.IsPermanent(err) && !deadline {
		return err
	}
	st := f.state()
	st.mu.Lock()
	prev := st.refusals[name]
	r := &refusal{size: -1, group: st.group(env), tries: 1}
	if prev != nil {
		r.tries = prev.tries + 1
	}
	backoff, ceiling := refusalBackoff, maxRefusalBackoff
	if deadline {
		backoff, ceiling = slowBackoff, maxSlowBackoff
	}
	wait := min(backoff<<(min(r.tries, 16)-1), ceiling)
	if deadline {
		err = s.unavailable("not fetched within its deadline of %s: tried again in %s", f.timeout(), wait)
	}
	if size >= 0 && fault.IsPermanent(err) {
		r.size = size
	}
	r.err, r.subject = err, s
	r.retry = time.Now().Add(wait)
	if len(st.refusals) >= maxRefusals && prev == nil {
		st.dropOldestRefusal()
	}
	st.refusals[name] = r
	st.mu.Unlock()
	log.FromContext(ctx).Info("source fetch refused; not fetched again until the source changes or the backoff ends",
		"source", s.String(), "error", err.Error(), "retryAfter", time.Until(r.retry).Round(time.Second).String(), "tries", r.tries)
	return err
}

// forgetRefusal drops the refusal of an entry that was fetched.
func (f *Fetcher) forgetRefusal(name string) {
	st := f.state()
	st.mu.Lock()
	delete(st.refusals, name)
	st.mu.Unlock()
}

// dropOldestRefusal makes room for one more. Called with st.mu held.
func (st *storeState) dropOldestRefusal() {
	oldest := ""
	for n, r := range st.refusals {
		if oldest == "" || r.retry.Before(st.refusals[oldest].retry) {
			oldest = n
		}
	}
	delete(st.refusals, oldest)
}

// wouldFit says whether an entry of size bytes fits group's share and
// the store with what is in use now. Called with st.mu held.
func (f *Fetcher) wouldFit(st *storeState, name string, size int64, group string) bool {
	if share := f.maxEnvBytes(); share > 0 {
		var used int64
		for n, e := range st.entries {
			if n != name && e.size > 0 && st.chargedTo(e, group) && st.inUse(n, e) {
				used += e.size
			}
		}
		if used+size > share {
			return false
		}
	}
	if limit := f.MaxStoreBytes; limit > 0 {
		var used int64
		for n, e := range st.entries {
			if n != name && e.size > 0 && st.inUse(n, e) {
				used += e.size
			}
		}
		if used+size > limit {
			return false
		}
	}
	return true
}

// cutByDeadline says whether err is a fetch that ran out of its time: its
// own deadline fired, or its client's timeout (the same length) did just
// before.
func cutByDeadline(ctx context.Context, err error) bool {
	if context.Cause(ctx) == errFetchDeadline {
		return true
	}
	d, ok := ctx.Deadline()
	var ne net.Error
	return ok && time.Until(d) < time.Second && (errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout())
}

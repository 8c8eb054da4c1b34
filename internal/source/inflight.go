package source

import (
	"context"
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Fetches in flight count against the store's bound (issue 32): what a
// fetch has written so far, under its staging directories, is counted as
// the store's, and a fetch that would take the store past its bound,
// once what nobody uses was evicted, is stopped. Several large fetches at
// once cannot fill the operator's work volume behind the store's back.

// errStoreFull is the cause of a fetch stopped for the store's bound.
var errStoreFull = errors.New("the source store is full")

// inflightFill is one fetch in progress.
type inflightFill struct {
	bytes int64
	group string
}

// inflightIn is what the fetch of entry name in progress for group has
// written, 0 when there is none. Called with st.mu held.
func (st *storeState) inflightIn(name, group string) int64 {
	if x, ok := st.inflightFills[name]; ok && x.group == group {
		return x.bytes
	}
	return 0
}

// watchFill counts what the fetch of entry name for env writes under
// dirs, every watchInterval, and cancels the returned context when the
// store cannot hold it. done ends the watch; it returns an Unavailable
// error when the watch stopped the fetch.
func (f *Fetcher) watchFill(ctx context.Context, s subject, name string, env types.UID, dirs ...string) (context.Context, func() error) {
	if f.MaxStoreBytes <= 0 && f.maxEnvBytes() <= 0 {
		// An unbounded store (a helper pod's): nothing to count against.
		return ctx, func() error { return nil }
	}
	st := f.state()
	st.mu.Lock()
	st.inflightFills[name] = inflightFill{group: st.group(env)}
	st.mu.Unlock()
	ctx, cancel := context.WithCancelCause(ctx)
	stop := make(chan struct{})
	finished := make(chan struct{})
	var full error
	go func() {
		defer close(finished)
		t := time.NewTicker(watchInterval)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				var n int64
				for _, d := range dirs {
					n += dirBytes(d)
				}
				if err := f.growFill(s, name, n); err != nil {
					full = err
					cancel(errStoreFull)
					return
				}
			}
		}
	}()
	return ctx, func() error {
		close(stop)
		<-finished
		cancel(nil)
		st.mu.Lock()
		delete(st.inflightFills, name)
		st.mu.Unlock()
		return full
	}
}

// growFill records that the fetch of name has written n bytes, evicting
// what nobody uses to make room; an error when the store still cannot
// hold it.
func (f *Fetcher) growFill(s subject, name string, n int64) error {
	st := f.state()
	st.mu.Lock()
	x := st.inflightFills[name]
	x.bytes = n
	st.inflightFills[name] = x
	limit := f.MaxStoreBytes
	if limit <= 0 {
		st.mu.Unlock()
		return nil
	}
	if n > limit {
		st.mu.Unlock()
		return s.permanent("takes more than the whole source store (%d bytes)", limit)
	}
	used := func() int64 {
		var total int64
		for _, e := range st.entries {
			if e.size > 0 {
				total += e.size
			}
		}
		for _, y := range st.inflightFills {
			total += y.bytes
		}
		return total
	}
	var gone []string
	for _, victim := range st.lru(func(v string, _ *entryState) bool { return v != name }) {
		if used() <= limit {
			break
		}
		if dir := st.evict(f.Root, victim); dir != "" {
			gone = append(gone, dir)
		}
	}
	total := used()
	st.mu.Unlock()
	removeEvicted(gone)
	if total > limit {
		return s.unavailable("the source store is full: its %d bytes hold sources in use and fetches in progress", limit)
	}
	return nil
}

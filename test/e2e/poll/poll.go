// Package poll waits for what the e2e tests observe over time (an HTTP
// answer, pods in a state, an environment's status): it probes at a fixed
// interval until a deadline and, when the deadline passes, says what it
// was waiting for and what it saw last.
//
// The interval is fixed, not backed off: the benchmark measures latencies
// with these waits, and a growing interval would add up to one interval
// to every sample.
package poll

import (
	"context"
	"fmt"
	"time"
)

// A Probe looks once. seen is what it saw, in words for a failure
// message; ok says whether that is what the wait is for; err ends the
// wait at once, for what can no longer turn out ok (a Stalled
// environment).
type Probe func(ctx context.Context) (seen string, ok bool, err error)

// Wait is one wait for What: a probe now, then one Every interval, until
// Within has passed since Since (the call to Until when zero).
type Wait struct {
	What   string
	Every  time.Duration
	Within time.Duration
	// Since is when the clock started, for a wait that measures a change
	// made before it began (a push, then the wait for its answer).
	Since time.Time
}

// TimeoutError is a wait that ran out of time or was ended.
type TimeoutError struct {
	What     string
	Within   time.Duration
	Probes   int
	LastSeen string
	// Err is the probe's or the context's error that ended the wait early.
	Err error
}

func (e *TimeoutError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: ended after %d probes: %v; last seen: %s", e.What, e.Probes, e.Err, e.LastSeen)
	}
	return fmt.Sprintf("%s: not within %s (%d probes); last seen: %s", e.What, e.Within, e.Probes, e.LastSeen)
}

func (e *TimeoutError) Unwrap() error { return e.Err }

// Until probes until the probe is ok and returns how long after Since
// that was; a *TimeoutError when the deadline passes, the probe returns an
// error or ctx ends first.
func (w Wait) Until(ctx context.Context, probe Probe) (time.Duration, error) {
	since := w.Since
	if since.IsZero() {
		since = time.Now()
	}
	deadline := since.Add(w.Within)
	timer := time.NewTimer(0)
	defer timer.Stop()
	fail := &TimeoutError{What: w.What, Within: w.Within}
	for {
		seen, ok, err := probe(ctx)
		fail.Probes++
		fail.LastSeen = seen
		switch {
		case ok:
			return time.Since(since), nil
		case err != nil:
			fail.Err = err
			return 0, fail
		}
		left := time.Until(deadline)
		if left <= 0 {
			return 0, fail
		}
		// One last probe at the deadline rather than none past it.
		timer.Reset(min(w.Every, left))
		select {
		case <-ctx.Done():
			fail.Err = ctx.Err()
			return 0, fail
		case <-timer.C:
		}
	}
}

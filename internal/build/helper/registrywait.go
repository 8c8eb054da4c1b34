package helper

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/internal/image"
	"github.com/devloop-dev/devloop/internal/message"
)

// A builder Job's assemble container that finds the registry down used to
// exit at once (ExitUnavailable); the operator then replaced the Job after
// a delay, and the new pod ran the whole build command again before it
// could push. The registry's return was noticed only at the next
// replacement, so a build healed up to a minute after the registry came
// back. Now the container waits for the registry itself, trying again
// every few seconds, and pushes what it already built as soon as the
// registry answers; it says so on its log (build.RegistryWaitLogPrefix),
// which the operator reads to report the environment Waiting. Past its
// wait it exits with ExitUnavailable as before.

// Delays between tries while the registry is down: doubled from the
// first to the last, each with up to a fifth of jitter so the builders of
// a team do not knock in step.
const (
	registryRetryFirst = time.Second
	registryRetryLast  = 4 * time.Second
)

// whileRegistryDown runs try until it succeeds, fails for a reason other
// than an unavailable registry (a host that does not resolve is a
// mistake in the spec sooner or later: the operator counts those), or
// wait has passed since the first failure. Each failed try is a line on
// log.
func whileRegistryDown(ctx context.Context, wait time.Duration, log io.Writer, try func() error) error {
	var since time.Time
	delay := registryRetryFirst
	for {
		err := try()
		var nsh *image.NoSuchHostError
		if err == nil || !fault.IsUnavailable(err) || errors.As(err, &nsh) || wait <= 0 {
			return err
		}
		if since.IsZero() {
			since = time.Now()
		}
		if time.Since(since) >= wait {
			return err
		}
		next := delay + time.Duration(rand.Int64N(int64(delay)/5+1))
		fmt.Fprintf(log, "%s: %s%s%s, next try in %s)\n", build.RegistryWaitLogPrefix, message.Truncate(err.Error(), 300),
			build.RegistryWaitLogSince, time.Since(since).Round(time.Second), next.Round(100*time.Millisecond))
		select {
		case <-ctx.Done():
			return err
		case <-time.After(next):
		}
		delay = min(2*delay, registryRetryLast)
	}
}

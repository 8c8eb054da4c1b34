package build

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/internal/image"
	"github.com/devloop-dev/devloop/internal/memo"
)

// A registry host that does not resolve (NXDOMAIN) is waited for like a
// registry down at first (DNS may be catching up with a new name), but a
// name that keeps not resolving is a mistake in the spec: after
// noSuchHostTries tries over at least noSuchHostWindow the environment
// stalls, naming the field that holds the name. It was retried as
// Waiting for as long as it existed. A try counts only noSuchHostSpacing
// after the last one counted: reconciles that come in a burst (an event,
// a status write, a wake) are one try, not five (13 tries were counted in
// 21 s).
const (
	noSuchHostTries   = 5
	noSuchHostWindow  = 20 * time.Second
	noSuchHostSpacing = noSuchHostWindow / (noSuchHostTries - 1)
)

// noSuchHosts counts, per environment and component, the tries in a row
// that found a registry host does not resolve (of: the host).
type noSuchHosts struct {
	// now is the clock; time.Now when nil.
	now    func() time.Time
	counts memo.Counts[failuresInARow]
}

// check counts err when a registry host in it does not resolve, and turns
// it Stalled once the tries are spent; any other outcome of env's builds
// but one still in flight (a builder Job started again) clears the count.
func (n *noSuchHosts) check(env types.UID, component string, err error, inFlight bool) error {
	if inFlight {
		return err
	}
	key := memo.Key(env, "host/"+component)
	var nsh *image.NoSuchHostError
	if !errors.As(err, &nsh) {
		n.counts.Delete(key)
		return err
	}
	now := time.Now()
	if n.now != nil {
		now = n.now()
	}
	got := n.counts.Update(key, func(f failuresInARow, _ bool) failuresInARow {
		if f.of != nsh.Host {
			f = failuresInARow{of: nsh.Host, first: now}
		}
		if f.count == 0 || now.Sub(f.last) >= noSuchHostSpacing {
			f.count++
			f.last = now
		}
		return f
	})
	if got.count < noSuchHostTries || now.Sub(got.first) < noSuchHostWindow {
		return err
	}
	// The message says the same on every later try, so the condition,
	// its event and status are not written again for each.
	return fault.Stalled(v1alpha1.ReasonBuildFailed, fmt.Errorf("registry host %s does not resolve (no such host, %d tries over at least %s): check %s: %w",
		nsh.Host, noSuchHostTries, noSuchHostWindow, nsh.Field, err))
}

// forget drops a deleted environment's counts.
func (n *noSuchHosts) forget(env types.UID) { n.counts.Forget(env) }

package build

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/internal/image"
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
	// maxNoSuchHosts bounds the environments remembered.
	maxNoSuchHosts = 256
)

// noSuchHosts counts, per environment and host, the tries in a row that
// found the host does not resolve; in memory only.
type noSuchHosts struct {
	// now is the clock; time.Now when nil.
	now func() time.Time
	mu  sync.Mutex
	// seen is by environment UID and component.
	seen map[string]hostTries
}

// hostTries is one environment's count.
type hostTries struct {
	host        string
	first, last time.Time
	tries       int
}

// check counts err when a registry host in it does not resolve, and turns
// it Stalled once the tries are spent; any other outcome of env's builds
// but one still in flight (a builder Job started again) clears the count.
func (n *noSuchHosts) check(env types.UID, component string, err error, inFlight bool) error {
	key := string(env) + "/" + component
	var nsh *image.NoSuchHostError
	n.mu.Lock()
	defer n.mu.Unlock()
	if inFlight {
		return err
	}
	if !errors.As(err, &nsh) {
		delete(n.seen, key)
		return err
	}
	if n.seen == nil || len(n.seen) >= maxNoSuchHosts {
		n.seen = map[string]hostTries{}
	}
	now := time.Now()
	if n.now != nil {
		now = n.now()
	}
	got := n.seen[key]
	if got.host != nsh.Host {
		got = hostTries{host: nsh.Host, first: now}
	}
	if got.tries == 0 || now.Sub(got.last) >= noSuchHostSpacing {
		got.tries++
		got.last = now
	}
	n.seen[key] = got
	if got.tries < noSuchHostTries || now.Sub(got.first) < noSuchHostWindow {
		return err
	}
	// The message says the same on every later try, so the condition,
	// its event and status are not written again for each.
	return fault.Stalled(v1alpha1.ReasonBuildFailed, fmt.Errorf("registry host %s does not resolve (no such host, %d tries over at least %s): check %s: %w",
		nsh.Host, noSuchHostTries, noSuchHostWindow, nsh.Field, err))
}

// forget drops a deleted environment's count.
func (n *noSuchHosts) forget(env types.UID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for key := range n.seen {
		if strings.HasPrefix(key, string(env)+"/") {
			delete(n.seen, key)
		}
	}
}

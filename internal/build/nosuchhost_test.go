package build

import (
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/internal/image"
)

// TestNoSuchHostStallsAfterFiveTriesOverTwentySeconds (issue 43 item 6):
// tries in a burst count once, so the environment stalls after the
// documented 5 tries over at least 20 s, not after 13 tries in 21 s; and
// the stalled message is the same on every later try (the condition and
// its event are not written again for each).
func TestNoSuchHostStallsAfterFiveTriesOverTwentySeconds(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	clock := start
	n := &noSuchHosts{now: func() time.Time { return clock }}
	nxdomain := image.NewNoSuchHostError("registry.team-a.invalid", "spec.registry.prefix",
		errors.New("dial tcp: lookup registry.team-a.invalid: no such host"))
	try := func() error { return n.check(types.UID("env"), "api", nxdomain, false) }

	// 14 tries 1.6 s apart, as the error backoff made them: 20.8 s.
	for i := 0; i < 14; i++ {
		clock = start.Add(time.Duration(i) * 1600 * time.Millisecond)
		if err := try(); fault.AsStalled(err) != nil {
			t.Fatalf("stalled after %d tries in %s: %v", i+1, clock.Sub(start), err)
		}
	}
	// Tries 5 s apart from then on: the fifth counted try stalls.
	var stalled []string
	for i := 0; i < 6 && len(stalled) < 2; i++ {
		clock = clock.Add(noSuchHostSpacing)
		if err := try(); fault.AsStalled(err) != nil {
			stalled = append(stalled, err.Error())
		}
	}
	if len(stalled) < 2 {
		t.Fatalf("not stalled after tries 5 s apart until %s", clock.Sub(start))
	}
	if clock.Sub(start) < noSuchHostWindow {
		t.Errorf("stalled %s after the first try, sooner than %s", clock.Sub(start), noSuchHostWindow)
	}
	if stalled[0] != stalled[1] {
		t.Errorf("the stalled message changes from try to try:\n%s\n%s", stalled[0], stalled[1])
	}
}

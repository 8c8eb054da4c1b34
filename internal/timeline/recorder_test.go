package timeline_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/devloop-dev/devloop/internal/timeline"
)

var t0 = time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)

func TestBeginSupersedesAndKeepsMaxChanges(t *testing.T) {
	r := timeline.NewRecorder()
	uid := types.UID("env")
	for i := 0; i < timeline.MaxChanges+3; i++ {
		r.Begin(uid, "app", fmt.Sprintf("dev@sha256:%d", i), t0.Add(time.Duration(i)*time.Minute), nil)
		// The same revision again (a reconcile after a restart) begins
		// nothing.
		r.Begin(uid, "app", fmt.Sprintf("dev@sha256:%d", i), t0.Add(time.Hour), nil)
	}
	changes := r.Changes(uid)
	if len(changes) != timeline.MaxChanges {
		t.Fatalf("%d changes kept, want %d", len(changes), timeline.MaxChanges)
	}
	if got := changes[0].Revision; got != fmt.Sprintf("dev@sha256:%d", timeline.MaxChanges+2) {
		t.Fatalf("newest is %s", got)
	}
	if changes[0].Result != timeline.InFlight {
		t.Fatalf("newest is %s, want InFlight", changes[0].Result)
	}
	for _, c := range changes[1:] {
		if c.Result != timeline.Superseded {
			t.Fatalf("%s is %s, want Superseded", c.Revision, c.Result)
		}
	}
}

func TestRecordWidensAStepAndKeepsStartOrder(t *testing.T) {
	r := timeline.NewRecorder()
	uid := types.UID("env")
	// Nothing in flight: nothing recorded (a drift correction is no
	// change).
	r.Record(uid, timeline.Deploy, "web", t0, t0.Add(time.Second))
	if got := r.Changes(uid); len(got) != 0 {
		t.Fatalf("recorded without a change: %+v", got)
	}
	r.Begin(uid, "app", "dev@sha256:1", t0, nil)
	r.Record(uid, timeline.Deploy, "web", t0.Add(3*time.Second), t0.Add(4*time.Second))
	r.Record(uid, timeline.Fetch, "", t0.Add(time.Second), t0.Add(2*time.Second))
	// A Helm action seen running, then done in a later reconcile.
	r.Record(uid, timeline.Deploy, "web", t0.Add(5*time.Second), t0.Add(9*time.Second))
	steps := r.Changes(uid)[0].Steps
	if len(steps) != 2 || steps[0].Name != timeline.Fetch || steps[1].Name != timeline.Deploy {
		t.Fatalf("steps %+v, want Fetch then one Deploy", steps)
	}
	if steps[1].Start != t0.Add(3*time.Second) || steps[1].Duration != 6*time.Second {
		t.Fatalf("Deploy %+v, want from 3s for 6s", steps[1])
	}
	for i := 0; i < timeline.MaxSteps+5; i++ {
		r.Record(uid, timeline.Push, fmt.Sprintf("c/i%d", i), t0, t0)
	}
	if n := len(r.Changes(uid)[0].Steps); n != timeline.MaxSteps {
		t.Fatalf("%d steps kept, want %d", n, timeline.MaxSteps)
	}
}

func TestParsePushedIsBounded(t *testing.T) {
	p := timeline.Pushed{Source: "app", Digest: "sha256:abc", At: t0, Pack: 1500 * time.Millisecond, Upload: 20 * time.Millisecond}
	got, ok := timeline.ParsePushed(p.String())
	if !ok || got != p {
		t.Fatalf("round trip: %+v %v, want %+v", got, ok, p)
	}
	for _, bad := range []string{
		"",
		"source=app;digest=sha256:abc", // no time
		"source=app;digest=sha256:abc;at=yesterday",   // not a time
		p.String() + ";pack-ms=-1",                    // negative
		p.String() + ";upload-ms=99999999999",         // more than a day
		p.String() + ";x=" + strings.Repeat("a", 600), // oversized
	} {
		if _, ok := timeline.ParsePushed(bad); ok {
			t.Errorf("accepted %q", bad)
		}
	}
}

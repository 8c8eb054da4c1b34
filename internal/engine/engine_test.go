package engine

import (
	"context"
	"testing"
	"time"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

func TestResultKeepsTheSoonestLookAndTheLastPhase(t *testing.T) {
	var r Result
	r.Merge(Result{RequeueAfter: time.Minute})
	r.Merge(Result{RequeueAfter: 0, Poll: true}) // zero is never: keeps a minute
	if r.RequeueAfter != time.Minute || !r.Poll {
		t.Fatalf("after a minute and a poll: %+v", r)
	}
	r.RequeueWithin(10 * time.Millisecond) // sooner than MinRequeue only spins
	if r.RequeueAfter != MinRequeue {
		t.Fatalf("RequeueWithin(10ms) = %s, want %s", r.RequeueAfter, MinRequeue)
	}
	r.RetrySoon() // a lost race is looked at sooner still
	if r.RequeueAfter != ConflictRetry {
		t.Fatalf("RetrySoon: %s, want %s", r.RequeueAfter, ConflictRetry)
	}
	r.Merge(Result{Phase: v1alpha1.PhaseBuilding, Message: "building web"})
	r.Merge(Result{RequeueAfter: time.Hour}) // no phase: keeps the last one
	if r.Phase != v1alpha1.PhaseBuilding || r.Message != "building web" || r.RequeueAfter != ConflictRetry {
		t.Fatalf("after a phase and a later hour: %+v", r)
	}
}

func TestPassSharesOneValuePerKey(t *testing.T) {
	type key struct{}
	made := 0
	make := func() *int { made++; v := made; return &v }
	p := &Pass{}
	a, b := Shared(p, key{}, make), Shared(p, key{}, make)
	if a != b || made != 1 {
		t.Fatalf("one pass made %d values for one key", made)
	}
	if c := Shared(&Pass{}, key{}, make); c == a {
		t.Fatal("another reconcile's pass shared this one's value")
	}
	if Shared(nil, key{}, make) == Shared(nil, key{}, make) {
		t.Fatal("a nil pass shared a value")
	}
}

func TestSetListsItsEnginesInCallOrder(t *testing.T) {
	triggers, builds, deploy, tests := fakeEngine{"triggers"}, fakeEngine{"builds"}, fakeEngine{"deploy"}, fakeEngine{"tests"}
	got := Set{Triggers: &triggers, Builds: &builds, Deploy: &deploy, Tests: &tests}.All()
	want := []Engine{&triggers, &builds, &deploy, &tests} // no live update engine
	if len(got) != len(want) {
		t.Fatalf("All() = %d engines, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("All()[%d] is not the %d-th engine in call order", i, i)
		}
	}
}

// fakeEngine has a field so that two of them are never the same pointer.
type fakeEngine struct{ name string }

func (*fakeEngine) Reconcile(context.Context, Request) (Result, error) { return Result{}, nil }
func (*fakeEngine) Finalize(context.Context, Request) error            { return nil }

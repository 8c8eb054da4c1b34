package source

import (
	"context"
	"testing"
	"time"
)

// Two operators in one process (an envtest suite beside a benchmark),
// even on one directory, keep their own Store: neither sees the other's
// entries or waits on the other's fetch locks. Copies of one Fetcher
// share theirs.
func TestStoresOfTwoOperatorsShareNothing(t *testing.T) {
	root := t.TempDir()
	a, b := &Fetcher{Root: root, Store: NewStore()}, &Fetcher{Root: root, Store: NewStore()}
	if a.state() == b.state() {
		t.Error("two operators' Fetchers share one store state")
	}
	if a.ReadingWith(nil).state() != a.state() {
		t.Error("a copy of a Fetcher has a store state of its own")
	}
	zero := &Fetcher{Root: root}
	if zero.ReadingWith(nil).state() != zero.state() {
		t.Error("a copy of a Fetcher given no Store has a store state of its own")
	}

	ctx := context.Background()
	unlock, err := a.store().locks.lockKey(ctx, "entry")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	bounded, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	unlockB, err := b.store().locks.lockKey(bounded, "entry")
	if err != nil {
		t.Fatalf("b waited for a's fetch lock of the entry: %v", err)
	}
	unlockB()
	// Within a, the entry's lock still holds: a second fetch waits.
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancelShort()
	if again, err := a.store().locks.lockKey(short, "entry"); err == nil {
		again()
		t.Error("a second fetch of the entry in a did not wait for the first")
	}
}

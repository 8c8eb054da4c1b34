package build

import (
	"context"
	"testing"
	"time"
)

// TestLanesAreOnePerNamespaceClaimAndPlatform: environments of the same
// name in two namespaces have claims of the same name; their builds do
// not wait for each other, nor do two platforms of one claim.
func TestLanesAreOnePerNamespaceClaimAndPlatform(t *testing.T) {
	l := newLanes()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	never := func(holder string) { t.Errorf("waited for %s", holder) }
	held, err := l.acquire(ctx, laneOf("a", "api-app-1234-gocache", "linux/amd64"), "image api", never)
	if err != nil {
		t.Fatal(err)
	}
	for _, lane := range []string{laneOf("b", "api-app-1234-gocache", "linux/amd64"), laneOf("a", "api-app-1234-gocache", "linux/arm64")} {
		release, err := l.acquire(ctx, lane, "image other", never)
		if err != nil {
			t.Fatal(err)
		}
		release()
	}
	// The same lane waits, naming the holder, until it is released.
	queued := make(chan string, 1)
	got := make(chan error)
	go func() {
		release, err := l.acquire(ctx, laneOf("a", "api-app-1234-gocache", "linux/amd64"), "image web", func(h string) { queued <- h })
		if err == nil {
			release()
		}
		got <- err
	}()
	select {
	case h := <-queued:
		if h != "image api" {
			t.Errorf("waited for %q, want image api", h)
		}
	case err := <-got:
		t.Fatalf("a second build took a held lane (err %v)", err)
	}
	held()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if len(l.held) != 0 || len(l.count) != 0 {
		t.Errorf("lanes left behind: %v %v", l.held, l.count)
	}
}

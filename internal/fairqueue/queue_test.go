package fairqueue

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func req(ns, name string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}
}

func mustGet(t *testing.T, q *Queue, want reconcile.Request) {
	t.Helper()
	got, shutdown := q.Get()
	if shutdown || got != want {
		t.Fatalf("Get = %v (shutdown %v), want %v", got, shutdown, want)
	}
}

// TestOneNamespaceHoldsAtMostItsShare: of four environments of team-a,
// added first, two are handed out; team-b's environment, added after
// them, goes second (it holds no worker yet), and team-a's third only
// when one of its own is Done.
func TestOneNamespaceHoldsAtMostItsShare(t *testing.T) {
	q := NewQueue(DefaultShare(4))
	for _, n := range []string{"a1", "a2", "a3", "a4"} {
		q.Add(req("team-a", n))
	}
	q.Add(req("team-b", "b1"))
	mustGet(t, q, req("team-a", "a1"))
	mustGet(t, q, req("team-b", "b1"))
	mustGet(t, q, req("team-a", "a2"))
	q.mu.Lock()
	ns, ok := q.next()
	q.mu.Unlock()
	if ok {
		t.Fatalf("team-a holds its share of 2 and only team-a waits, yet %q would be handed out", ns)
	}
	got := make(chan reconcile.Request, 1)
	go func() { r, _ := q.Get(); got <- r }()
	q.Done(req("team-b", "b1")) // frees a worker, but not one of team-a's
	q.Done(req("team-a", "a1"))
	if r := <-got; r != req("team-a", "a3") {
		t.Fatalf("after team-a's a1 was Done, Get = %v, want team-a/a3", r)
	}
	if q.Len() != 1 {
		t.Fatalf("Len = %d, want 1 (team-a/a4)", q.Len())
	}
}

// TestFewestInFlightGoesFirst: of two waiting namespaces, the one holding
// fewer workers goes first even when the other's item waited longer.
func TestFewestInFlightGoesFirst(t *testing.T) {
	q := NewQueue(3)
	q.Add(req("team-a", "a1"))
	q.Add(req("team-a", "a2"))
	mustGet(t, q, req("team-a", "a1"))
	q.Add(req("team-b", "b1"))
	mustGet(t, q, req("team-b", "b1"))
	mustGet(t, q, req("team-a", "a2"))
}

// TestAddedWhileProcessingComesBackOnDone keeps client-go's guarantee: an
// item is never handed to two workers at once, and one added meanwhile
// is handed out again after Done, once.
func TestAddedWhileProcessingComesBackOnDone(t *testing.T) {
	q := NewQueue(2)
	a := req("team-a", "a1")
	q.Add(a)
	mustGet(t, q, a)
	q.Add(a)
	q.Add(a)
	if q.Len() != 0 {
		t.Fatalf("Len = %d while a1 is processed, want 0", q.Len())
	}
	q.Done(a)
	if q.Len() != 1 {
		t.Fatalf("Len = %d after Done, want 1", q.Len())
	}
	mustGet(t, q, a)
}

// TestShutDownDrainsPastTheShare: shutting down, what waits is still
// handed out (the share no longer holds it back), then Get says shutdown.
func TestShutDownDrainsPastTheShare(t *testing.T) {
	q := NewQueue(1)
	q.Add(req("team-a", "a1"))
	q.Add(req("team-a", "a2"))
	mustGet(t, q, req("team-a", "a1"))
	q.ShutDown()
	mustGet(t, q, req("team-a", "a2"))
	if _, shutdown := q.Get(); !shutdown {
		t.Fatal("Get after the drain did not say shutdown")
	}
	if !q.ShuttingDown() {
		t.Fatal("ShuttingDown = false after ShutDown")
	}
}

// TestNewKeepsDelaysAndBackoff: behind client-go's rate-limiting queue,
// AddAfter and AddRateLimited still reach the fair queue.
func TestNewKeepsDelaysAndBackoff(t *testing.T) {
	q := New(4, 0)("test", workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	q.AddAfter(req("team-a", "later"), 10*time.Millisecond)
	q.AddRateLimited(req("team-b", "backoff"))
	got := map[reconcile.Request]bool{}
	for range 2 {
		r, shutdown := q.Get()
		if shutdown {
			t.Fatal("queue shut down")
		}
		got[r] = true
		q.Done(r)
	}
	if !got[req("team-a", "later")] || !got[req("team-b", "backoff")] {
		t.Fatalf("got %v, want both items", got)
	}
	if n := q.NumRequeues(req("team-b", "backoff")); n != 1 {
		t.Fatalf("NumRequeues = %d, want 1", n)
	}
}

// Package fairqueue is the reconciler's work queue with a fair share of
// workers per namespace: one tenant's slow environments (a source that
// never answers, a Helm action that hangs) hold at most its share of the
// workers, and a free worker goes to the namespace holding the fewest.
//
// Queue is the plain FIFO of client-go's workqueue with the choice of the
// next item changed; the delays and the per-item backoff stay client-go's
// (New wraps it in its delaying and rate-limiting queues).
package fairqueue

import (
	"sync"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// DefaultShare is how many workers one namespace may hold when the
// operator names no limit: half of them, rounded up, so that one tenant
// alone never holds every worker while another namespace waits, with one
// worker there is no share to keep, and then one is all.
func DefaultShare(workers int) int {
	return max(1, (workers+1)/2)
}

// New is a controller's NewQueue: a Queue allowing share in-flight items
// per namespace (DefaultShare(workers) when share < 1), behind client-go's
// delaying and rate-limiting queues.
func New(workers, share int) func(string, workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	if share < 1 {
		share = DefaultShare(workers)
	}
	return func(name string, limiter workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
		delaying := workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[reconcile.Request]{
			Name: name, Queue: NewQueue(share),
		})
		return workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[reconcile.Request]{
			Name: name, DelayingQueue: delaying,
		})
	}
}

// Queue is a workqueue.TypedInterface with the same guarantees as
// client-go's (an item is processed by one worker at a time; one added
// while processed is processed again after Done), which hands out the
// next item of the namespace holding the fewest in-flight items, the
// longest waiting first among equals, and none of a namespace already
// holding share items. Namespaces are cluster-scoped requests' "".
type Queue struct {
	share int

	mu   sync.Mutex
	cond *sync.Cond
	// waiting: each namespace's items in the order they were added.
	waiting map[string][]entry
	// queued: items waiting or to be queued again when Done.
	queued map[reconcile.Request]bool
	// processing: items handed out and not yet Done.
	processing map[reconcile.Request]bool
	inFlight   map[string]int
	length     int
	seq        uint64
	shutdown   bool
	drain      bool
}

type entry struct {
	req reconcile.Request
	seq uint64 // when it was added: the longest waiting goes first
}

// NewQueue is a Queue letting one namespace hold at most share workers
// (at least one).
func NewQueue(share int) *Queue {
	q := &Queue{
		share: max(1, share), waiting: map[string][]entry{}, queued: map[reconcile.Request]bool{},
		processing: map[reconcile.Request]bool{}, inFlight: map[string]int{},
	}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// Add queues item unless it is queued already; an item being processed
// is queued again when it is Done.
func (q *Queue) Add(item reconcile.Request) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shutdown || q.queued[item] {
		return
	}
	q.queued[item] = true
	if q.processing[item] {
		return
	}
	q.push(item)
}

func (q *Queue) push(item reconcile.Request) {
	q.seq++
	q.waiting[item.Namespace] = append(q.waiting[item.Namespace], entry{req: item, seq: q.seq})
	q.length++
	q.cond.Broadcast()
}

// Len is how many items wait.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.length
}

// Get blocks until an item may be handed out: one of a namespace below
// its share. Shutting down, the share no longer holds back what is left
// to drain.
func (q *Queue) Get() (reconcile.Request, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for {
		if ns, ok := q.next(); ok {
			return q.take(ns), false
		}
		if q.shutdown {
			return reconcile.Request{}, true
		}
		q.cond.Wait()
	}
}

// next is the namespace whose first item goes next: below its share
// (unless shutting down), fewest in flight, then longest waiting.
func (q *Queue) next() (string, bool) {
	best, found := "", false
	for ns, items := range q.waiting {
		if len(items) == 0 || (!q.shutdown && q.inFlight[ns] >= q.share) {
			continue
		}
		if !found || q.inFlight[ns] < q.inFlight[best] ||
			(q.inFlight[ns] == q.inFlight[best] && items[0].seq < q.waiting[best][0].seq) {
			best, found = ns, true
		}
	}
	return best, found
}

func (q *Queue) take(ns string) reconcile.Request {
	items := q.waiting[ns]
	item := items[0].req
	if len(items) == 1 {
		delete(q.waiting, ns)
	} else {
		q.waiting[ns] = items[1:]
	}
	q.length--
	delete(q.queued, item)
	q.processing[item] = true
	q.inFlight[ns]++
	return item
}

// Done ends the processing of item: its namespace's worker is free, and
// the item waits again if it was added meanwhile.
func (q *Queue) Done(item reconcile.Request) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.processing[item] {
		return
	}
	delete(q.processing, item)
	if q.inFlight[item.Namespace]--; q.inFlight[item.Namespace] <= 0 {
		delete(q.inFlight, item.Namespace)
	}
	if q.queued[item] {
		q.push(item)
	}
	// A namespace below its share again, or a drain waiting for the last
	// item.
	q.cond.Broadcast()
}

// ShutDown makes Get return shutdown once nothing is left to hand out.
func (q *Queue) ShutDown() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.shutdown = true
	q.cond.Broadcast()
}

// ShutDownWithDrain shuts down and waits until every item handed out is
// Done.
func (q *Queue) ShutDownWithDrain() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.shutdown, q.drain = true, true
	q.cond.Broadcast()
	for len(q.processing) > 0 && q.drain {
		q.cond.Wait()
	}
}

// ShuttingDown says whether ShutDown was called.
func (q *Queue) ShuttingDown() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.shutdown
}

package helm

import (
	"context"
	"sync/atomic"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// Releases is what one operator remembers of its Helm work between calls:
// the revisions it wrote (a pending one it left unlocks at once,
// lockExpiry), its actions in flight and the channel that wakes their
// environments, and the discovery per identity with the count of CRDs
// applied that ages it. The deploy engine operator.New builds holds one,
// so two operators in one process (an envtest suite beside a benchmark)
// share none of it; what they do share is what two processes share,
// Helm's own lock on a release (its pending-* status) and the writer
// label (writer.go).
type Releases struct {
	written     *revisionBook
	inFlight    *helmActions
	discoveries *discoveries
	// crdsApplied counts the CRDs the deploy engine applied (not Helm):
	// a cached discovery older than the count discovers again.
	crdsApplied atomic.Int64
}

// NewReleases is an operator's Helm memory, empty: a new process's.
func NewReleases() *Releases {
	return &Releases{
		written:     &revisionBook{latest: map[string]int{}},
		inFlight:    newHelmActions(),
		discoveries: &discoveries{m: map[string]*identityDiscovery{}},
	}
}

// ReconcileRelease is ReconcileRelease for a caller that keeps no Helm
// memory between calls (the tooling, tests of one call): a revision a
// previous call left pending waits out its timeout, as for a new process.
func ReconcileRelease(ctx context.Context, req ReleaseRequest) (Outcome, error) {
	return NewReleases().Reconcile(ctx, req)
}

// NewConfigFactory is r.ConfigFactory of Helm memory of its own: its
// configurations share their identity's discovery with one another only.
func NewConfigFactory(cfg *rest.Config, impersonate string) ConfigFactory {
	return NewReleases().ConfigFactory(cfg, impersonate)
}

// CRDApplied tells r's cached discoveries that a CRD was applied (by the
// deploy engine's Apply, not by Helm): whoever deploys next sees it.
func (r *Releases) CRDApplied() { r.crdsApplied.Add(1) }

// Wakes reports environments whose Helm action ended outside a
// reconcile, so the controller reconciles them at once.
func (r *Releases) Wakes() <-chan event.GenericEvent { return r.inFlight.wake }

// InFlight says an action on the release key names is in flight, or
// ended without its outcome taken by a reconcile yet.
func (r *Releases) InFlight(key string) bool { return r.inFlight.pending(key) }

// PendingDigest is the chart and values digest (ReleaseRequest.Digest)
// of the action in flight on the release key names, or ended without its
// outcome taken; ok is false when there is none.
func (r *Releases) PendingDigest(key string) (digest string, ok bool) {
	return r.inFlight.pendingDigest(key)
}

// ReconcileInFlight runs r.Reconcile for req as the release's one action
// in flight, or takes the outcome of the one already under way (see
// helmActions.reconcile); env is woken when it ends after the reconcile
// stopped waiting.
func (r *Releases) ReconcileInFlight(ctx context.Context, key string, env client.ObjectKey, req ReleaseRequest) (run *Run, done bool) {
	return r.inFlight.reconcile(ctx, key, env, req, r.Reconcile)
}

// StopInFlight cancels the action in flight on the release key names
// and waits a little for it to end (see helmActions.stop).
func (r *Releases) StopInFlight(key string) error { return r.inFlight.stop(key) }

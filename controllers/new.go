package controllers

import (
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/devloop-dev/devloop/internal/engine"
	"github.com/devloop-dev/devloop/internal/ownwrites"
	"github.com/devloop-dev/devloop/internal/plan"
)

// Wiring is what the reconciler works with besides the manager: the
// identity, sources step and engines internal/operator.New made, and the
// operator's settings (zero: the defaults).
type Wiring struct {
	Identity         Identities
	Sources          SourceResolver
	Engines          engine.Set
	Policy           plan.Policy
	WaitInterval     time.Duration
	DriftInterval    time.Duration
	ReconcileTimeout time.Duration
	NamespaceShare   int
}

// New is the one place the reconciler is made, for the manager, the
// envtest suites and the benchmarks alike: it reads through the ownwrites
// client (never an environment older than its own last write) and the
// manager's API reader, and records events as "devloop". A test that
// changes a part (a client that counts, a blocking engine) sets it on the
// result.
func New(mgr ctrl.Manager, w Wiring) *DevEnvironmentReconciler {
	return &DevEnvironmentReconciler{
		Client:           ownwrites.New(mgr.GetClient(), mgr.GetAPIReader()),
		APIReader:        mgr.GetAPIReader(),
		Recorder:         mgr.GetEventRecorder("devloop"),
		Identity:         w.Identity,
		Sources:          w.Sources,
		Engines:          w.Engines,
		Policy:           w.Policy,
		WaitInterval:     w.WaitInterval,
		DriftInterval:    w.DriftInterval,
		ReconcileTimeout: w.ReconcileTimeout,
		NamespaceShare:   w.NamespaceShare,
	}
}

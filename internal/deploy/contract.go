package deploy

import (
	"context"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/engine"
)

// Reconcile deploys req.Component and reports whether its objects are
// ready (the engine contract). A component still
// rolling out asks to be polled: nothing watches what it deployed.
func (e *Engine) Reconcile(ctx context.Context, req engine.Request) (engine.Result, error) {
	if req.Component == nil {
		return engine.Result{}, nil
	}
	res, err := e.reconcileComponent(ctx, req.Env, req.Component, req.Status, req.Tenant, req.Sources, req.Progress)
	switch res.Phase {
	case v1alpha1.PhaseReady, v1alpha1.PhaseFailed, "":
	default:
		res.Poll = true
	}
	return res, err
}

// Finalize removes what Reconcile deployed for req.Component, as its last
// status records it (req.Status, nil when it has none).
func (e *Engine) Finalize(ctx context.Context, req engine.Request) error {
	if req.Component == nil {
		return nil
	}
	if err := e.finalizeComponent(ctx, req.Env, req.Component, req.Status, req.Tenant); err != nil {
		return err
	}
	// What was removed is no longer the component's: its status entry
	// says so here, where it was written (a component turned off keeps
	// its entry).
	if st := req.Status; st != nil {
		st.Release, st.Inventory, st.Drift = nil, nil, nil
	}
	return nil
}

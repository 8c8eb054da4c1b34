package controllers

import (
	"context"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// ComponentResult is what an engine reports about one component.
type ComponentResult struct {
	// Phase the component is in after the engine ran.
	Phase v1alpha1.ComponentPhase
	// Message says why, in words for `kubectl get`.
	Message string
}

// ComponentEngine builds and deploys one component whose dependencies are
// Ready, and removes what it deployed. The build and deploy engines
// implement it; the reconciler only orders the calls and gates them on the
// DAG.
type ComponentEngine interface {
	// ReconcileComponent brings c to its declared state. It is called on
	// every reconcile while c's dependencies are Ready and must be
	// idempotent. An error is a failure to retry (or a *StallingError).
	ReconcileComponent(ctx context.Context, env *v1alpha1.DevEnvironment, c *v1alpha1.Component, st *v1alpha1.ComponentStatus) (ComponentResult, error)
	// FinalizeComponent removes what ReconcileComponent deployed. Called in
	// reverse dependency order when the environment is deleted.
	FinalizeComponent(ctx context.Context, env *v1alpha1.DevEnvironment, c *v1alpha1.Component) error
}

// IdleEngine is the deploy engine of an operator built without one: it
// deploys nothing, so a component whose images are built has nothing left
// to do and is Ready. Its message says so, so nobody mistakes it for a
// deployment.
type IdleEngine struct{}

// ReconcileComponent reports the component Ready with nothing done.
func (IdleEngine) ReconcileComponent(context.Context, *v1alpha1.DevEnvironment, *v1alpha1.Component, *v1alpha1.ComponentStatus) (ComponentResult, error) {
	return ComponentResult{Phase: v1alpha1.PhaseReady, Message: "images built; nothing deployed: no deploy engine in this operator"}, nil
}

// FinalizeComponent has nothing to remove.
func (IdleEngine) FinalizeComponent(context.Context, *v1alpha1.DevEnvironment, *v1alpha1.Component) error {
	return nil
}

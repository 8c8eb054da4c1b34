package controllers

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/source"
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
	// in gives access to what the reconcile resolved and fetched.
	ReconcileComponent(ctx context.Context, env *v1alpha1.DevEnvironment, c *v1alpha1.Component, st *v1alpha1.ComponentStatus, in *ComponentInputs) (ComponentResult, error)
	// FinalizeComponent removes what ReconcileComponent deployed. Called in
	// reverse dependency order when the environment is deleted.
	// st is the component's last status (nil when it has none): the
	// inventory and the release to remove are read from it.
	FinalizeComponent(ctx context.Context, env *v1alpha1.DevEnvironment, c *v1alpha1.Component, st *v1alpha1.ComponentStatus) error
}

// ComponentInputs is what one reconcile of an environment resolved, shared
// by every component of that reconcile: sources are fetched at most once and
// an engine may keep per-reconcile state (its impersonating client) in it.
type ComponentInputs struct {
	// Artifact fetches a source's content by name (once per reconcile).
	Artifact func(name string) (*source.Artifact, error)
	// Source returns a source's resolved reference, which tag templates
	// render from.
	Source func(name string) (source.Ref, bool)

	// clients are the impersonating clients of this reconcile, by user.
	clients map[string]client.Client
}

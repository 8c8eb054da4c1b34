package controllers

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/internal/deploy"
	"github.com/devloop-dev/devloop/internal/identity"
	"github.com/devloop-dev/devloop/internal/liveupdate"
	"github.com/devloop-dev/devloop/internal/source"
	"github.com/devloop-dev/devloop/internal/testrun"
)

// The engines the steps call, one small interface each. Each engine owns
// its orchestration next to its mechanics and reports outcomes as
// internal/fault errors with a reason; the reconciler only orders the
// calls, gates them on the DAG and summarizes status.

// Identities gives the tenant of one reconcile: who every request made
// for the environment acts as (identity.Identity).
type Identities interface {
	For(env *v1alpha1.DevEnvironment) *identity.Tenant
}

// ImageBuilder builds components' images (build.Engine).
type ImageBuilder interface {
	// Session starts one reconcile's builds of env.
	Session(env *v1alpha1.DevEnvironment, t *identity.Tenant, sources source.Resolved) *build.Session
	// Wake reports environments whose out-of-reconcile build ended.
	Wake() <-chan event.GenericEvent
	// Forget drops what the engine remembers of a deleted environment.
	Forget(env types.UID)
}

// Deployer deploys one component whose dependencies are Ready and whose
// images are built, and removes what it deployed (deploy.Engine).
type Deployer interface {
	// ReconcileComponent brings c to its declared state. It is called on
	// every reconcile while c's dependencies are Ready and must be
	// idempotent.
	// progress is told before a long action starts.
	ReconcileComponent(ctx context.Context, env *v1alpha1.DevEnvironment, c *v1alpha1.Component, st *v1alpha1.ComponentStatus, t *identity.Tenant, sources source.Resolved, progress deploy.Progress) (deploy.Result, error)
	// FinalizeComponent removes what ReconcileComponent deployed. st is
	// the component's last status (nil when it has none): the inventory
	// and the release to remove are read from it.
	FinalizeComponent(ctx context.Context, env *v1alpha1.DevEnvironment, c *v1alpha1.Component, st *v1alpha1.ComponentStatus, t *identity.Tenant) error
}

// LiveUpdater puts a component's new images into its running pods in
// place when only their liveUpdate paths changed, and syncs pods started
// since (liveupdate.Engine).
type LiveUpdater interface {
	Update(ctx context.Context, req liveupdate.Request) (liveupdate.Outcome, error)
}

// TestRunner runs test suites as Jobs (testrun.Engine).
type TestRunner interface {
	// TakeTrigger moves a plain trigger annotation into pending.
	TakeTrigger(ctx context.Context, env, before *v1alpha1.DevEnvironment) (retrySoon bool, err error)
	// Run records, starts, observes and trims test runs.
	Run(ctx context.Context, in testrun.Inputs) (testrun.Hints, error)
	// Forget drops what the engine keeps of a deleted environment (its
	// metric series).
	Forget(env *v1alpha1.DevEnvironment)
}

package controllers

import (
	"k8s.io/apimachinery/pkg/types"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/identity"
	"github.com/devloop-dev/devloop/internal/source"
)

// The engines the steps call speak one contract (internal/engine): one
// request, one result, Reconcile and Finalize. Each owns its
// orchestration next to its mechanics and reports outcomes as
// internal/fault errors with a reason; the reconciler only orders the
// calls, gates them on the DAG and summarizes status. Two collaborators
// are not engines: who requests act as, and the sources step.

// Identities gives the tenant of one reconcile: who every request made
// for the environment acts as (identity.Identity).
type Identities interface {
	For(env *v1alpha1.DevEnvironment) *identity.Tenant
}

// SourceResolver resolves an environment's sources, once per interval,
// and gives the engines one reconcile's sources (source.Resolver).
type SourceResolver interface {
	// Begin starts one reconcile's sources; Sources.Resolve is the
	// sources step.
	Begin(env *v1alpha1.DevEnvironment, t *identity.Tenant) *source.Sources
	// Forget drops what is remembered of a deleted environment.
	Forget(env types.UID)
}

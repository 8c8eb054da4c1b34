// Package engine is the contract between the reconciler and the engines
// that do its work (build, live update, deploy, test runs, triggers): one
// request, one result, the same two methods for every engine.
//
// The reconciler orders the calls, gates them on the DAG and summarizes
// status; an engine owns its orchestration next to its mechanics, writes
// only its part of status and reports failures as internal/fault errors.
// Nothing here imports an engine or the controllers.
package engine

import (
	"context"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/identity"
	"github.com/devloop-dev/devloop/internal/plan"
	"github.com/devloop-dev/devloop/internal/source"
)

// Engine is what every engine implements.
type Engine interface {
	// Reconcile brings what the engine owns for req to its declared
	// state. It is called on every reconcile the request applies to and
	// must be idempotent: the process may die at any line.
	Reconcile(ctx context.Context, req Request) (Result, error)
	// Finalize removes what Reconcile made for req.Component, and, when
	// req.Component is nil (the environment is being deleted, after every
	// component was finalized), forgets what the engine remembers of the
	// environment.
	Finalize(ctx context.Context, req Request) error
}

// Request is what one reconcile asks of an engine.
type Request struct {
	// Env is the environment; engines write their part of its status.
	Env *v1alpha1.DevEnvironment
	// Before is Env as last written. An engine that writes Env itself (a
	// test run's annotations) moves Before's resourceVersion to the one it
	// wrote, so the reconcile's final status patch, computed against
	// Before, carries no stale precondition.
	Before *v1alpha1.DevEnvironment
	// Plan is the checked spec; nil before it is planned (the triggers
	// step) or when it does not plan.
	Plan *plan.Plan
	// Component is the component the request is about and Status its
	// status entry; both nil for engines that act on the whole
	// environment (test runs, triggers).
	Component *v1alpha1.Component
	Status    *v1alpha1.ComponentStatus
	// Tenant is who every request made for the environment acts as.
	Tenant *identity.Tenant
	// Sources are this reconcile's sources: references as resolved,
	// content fetched at most once.
	Sources source.Resolved
	// Progress, when set, is told before a long action starts (a build, a
	// Helm upgrade), so status can say so while it runs.
	Progress func(message string)
	// Pass is what this reconcile's engine calls share (a registry
	// client made once); never nil when the reconciler makes the request.
	Pass *Pass
}

// Say tells Progress, when set, what is about to happen.
func (r Request) Say(message string) {
	if r.Progress != nil {
		r.Progress(message)
	}
}

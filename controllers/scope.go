package controllers

import (
	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/engine"
	"github.com/devloop-dev/devloop/internal/identity"
	"github.com/devloop-dev/devloop/internal/plan"
	"github.com/devloop-dev/devloop/internal/source"
)

// scope is what one reconcile of one environment observed and decided,
// shared by the steps. Steps write status through it; only summarize sets
// the reconciler's conditions (v1alpha1.ConditionOwners: the test run
// engine owns TriggerHandled).
type scope struct {
	env *v1alpha1.DevEnvironment
	// read is env as the reconcile read it: what changed since, for
	// events and polling.
	read *v1alpha1.DevEnvironment
	// before is env as last written (as read, until a step writes): the
	// final status patch is computed against it.
	before *v1alpha1.DevEnvironment
	// progressing is the progress write still on its way (status.go);
	// settleProgress waits for it before the environment is written again.
	progressing *progressWrite

	// plan is the checked dependency graph, set by the plan step.
	plan *plan.Plan
	// sources are this reconcile's sources, resolved by the sources step.
	sources *source.Sources
	// tenant acts as the environment's ServiceAccount; its client is made
	// on first use.
	tenant *identity.Tenant
	// pass is what this reconcile's engine calls share.
	pass *engine.Pass

	// next is when to look again even if nothing changes (a branch to
	// resolve again; zero is never) and whether the reconcile waits for
	// something no event reports (a rollout, a warm builder pod starting):
	// such a wait is polled soon (rolloutPoll) instead of after
	// WaitInterval. Its phase is unused.
	next engine.Result
}

// lookAgain keeps what an engine's result says about when to look again.
func (s *scope) lookAgain(res engine.Result) {
	s.next.Merge(engine.Result{RequeueAfter: res.RequeueAfter, Poll: res.Poll})
}

// request is what the scope asks of an engine about component c (nil:
// the whole environment).
func (s *scope) request(c *v1alpha1.Component, st *v1alpha1.ComponentStatus, progress func(string)) engine.Request {
	return engine.Request{Env: s.env, Before: s.before, Plan: s.plan, Component: c, Status: st,
		Tenant: s.tenant, Sources: s.sources, Progress: progress, Pass: s.pass}
}

// componentStatus returns the status entry of a component, adding it when
// missing.
func (s *scope) componentStatus(name string) *v1alpha1.ComponentStatus {
	st := &s.env.Status
	if c := st.Component(name); c != nil {
		return c
	}
	st.Components = append(st.Components, v1alpha1.ComponentStatus{Name: name, Phase: v1alpha1.PhasePending})
	return &st.Components[len(st.Components)-1]
}

// isReady reports whether a component is Ready, or a test suite has passed
// its latest run.
func (s *scope) isReady(name string) bool {
	if c := s.env.Status.Component(name); c != nil {
		return c.Ready()
	}
	return s.env.Status.Test(name).Passed()
}

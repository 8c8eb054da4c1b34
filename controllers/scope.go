package controllers

import (
	"time"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/internal/identity"
	"github.com/devloop-dev/devloop/internal/plan"
	"github.com/devloop-dev/devloop/internal/source"
)

// scope is what one reconcile of one environment observed and decided,
// shared by the steps. Steps write status through it; only summarize sets
// the conditions.
type scope struct {
	env *v1alpha1.DevEnvironment
	// read is env as the reconcile read it: what changed since, for
	// events and polling.
	read *v1alpha1.DevEnvironment
	// before is env as last written (as read, until a step writes): the
	// final status patch is computed against it.
	before *v1alpha1.DevEnvironment

	// plan is the checked dependency graph, set by the plan step.
	plan *plan.Plan

	// refs are the resolved sources by name, set by the sources step.
	refs map[string]source.Ref
	// artifacts are the sources fetched during this reconcile.
	artifacts map[string]*source.Artifact
	// tenant acts as the environment's ServiceAccount; its client is made
	// on first use.
	tenant *identity.Tenant
	// builds are this reconcile's image builds; made on first use.
	builds *build.Session

	// requeueAfter is the soonest time something must be looked at again
	// even if nothing changes (a branch to resolve again); zero is never.
	requeueAfter time.Duration
	// unwatched is set when the reconcile waits for something no event
	// reports (a rollout, a warm builder pod starting): it is polled soon
	// (rolloutPoll) instead of after WaitInterval.
	unwatched bool
}

// requeueWithin asks for a reconcile no later than d from now.
func (s *scope) requeueWithin(d time.Duration) {
	if d < time.Second {
		d = time.Second
	}
	if s.requeueAfter == 0 || d < s.requeueAfter {
		s.requeueAfter = d
	}
}

// conflictRetry is how soon a reconcile whose write lost a race (the
// cache had not seen the newest version yet) looks again.
const conflictRetry = 200 * time.Millisecond

// retrySoon asks for another reconcile shortly, without an error: a
// conflicting write is not a failure, only a stale read.
func (s *scope) retrySoon() {
	if s.requeueAfter == 0 || conflictRetry < s.requeueAfter {
		s.requeueAfter = conflictRetry
	}
}

// wrote notes that a step wrote env and holds the version it wrote: the
// final status patch, computed against before, must not carry the
// resourceVersion along (it would turn into a precondition that the
// writes after this one, such as removing a pending trigger, break).
func (s *scope) wrote() {
	s.before.ResourceVersion = s.env.ResourceVersion
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

// Ref is a source's resolved reference (source.Resolved).
func (s *scope) Ref(name string) (source.Ref, bool) {
	ref, ok := s.refs[name]
	return ref, ok
}

package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/engine"
	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/internal/liveupdate"
	"github.com/devloop-dev/devloop/internal/message"
	"github.com/devloop-dev/devloop/internal/timeline"
)

// reconcileComponents walks the components in DAG order. Every component
// whose dependencies are all Ready is handed to the engines, whatever
// happened to its siblings: a failure is recorded on its component and
// the walk goes on, so the outcome never depends on the order of the
// list. A component whose dependencies are not all Ready is Blocked and
// names them. Gating is re-evaluated on every reconcile, so a dependency
// rolling out again blocks its dependents until it is Ready again.
func (r *DevEnvironmentReconciler) reconcileComponents(ctx context.Context, s *scope) error {
	var w componentsWalk
	for _, name := range s.plan.ComponentOrder() {
		st := s.componentStatus(name)
		if reason := s.offReason(name); reason != "" {
			if err := r.turnOff(ctx, s, name, reason, st); err != nil {
				st.Message = message.Truncate(message.Condense(err.Error()), v1alpha1.MaxComponentMessage)
				w.failed = append(w.failed, fmt.Errorf("component %s: %w", name, err))
			}
			continue
		}
		if waiting := s.plan.Graph.WaitingFor(name, s.isReady); len(waiting) > 0 {
			st.Phase = v1alpha1.PhaseBlocked
			st.WaitingFor = waiting
			st.Message = "waiting for " + s.describeDependencies(waiting) + " to be Ready"
			if s.blockedOnlyByOff(waiting, w.idle) {
				// Nothing in flight will unblock it: not pending work.
				w.idle = append(w.idle, name)
			} else {
				w.blocked = append(w.blocked, name)
			}
			continue
		}
		st.WaitingFor = nil
		if unpushed := s.sources.Unpushed(componentSources(s.plan.Components[name])); unpushed != nil {
			// Its own source is not pushed yet: it waits, and only it
			// (and what depends on it) does.
			st.Phase = v1alpha1.PhasePending
			st.Message = message.Truncate(message.Condense(unpushed.Error()), v1alpha1.MaxComponentMessage)
			w.unpushed = append(w.unpushed, name)
			continue
		}
		if err := r.reconcileComponent(ctx, s, name, st, &w); err != nil {
			st.Phase = v1alpha1.PhaseFailed
			if o := classify(err); o.dependencyDown && o.class != stalling {
				// A registry that is down is waited for, not a failure of
				// the component; one that stalled the environment (a host
				// that never resolves) is the component's failure.
				st.Phase = v1alpha1.PhaseBuilding
			}
			st.Message = message.Truncate(message.Condense(err.Error()), v1alpha1.MaxComponentMessage)
			w.failed = append(w.failed, fmt.Errorf("component %s: %w", name, err))
		}
	}
	return r.componentsOutcome(s, &w)
}

// componentsWalk is what one walk over the components found.
type componentsWalk struct {
	// inFlight are components building or rolling out; blocked wait on a
	// dependency; failed are the errors of components that failed.
	inFlight, blocked []string
	// idle are blocked only by components turned off (Disabled).
	idle []string
	// unpushed wait for the first push of a source they read.
	unpushed []string
	failed   []error
	// deploys is set when a component deploys a release or manifests.
	deploys bool
}

// reconcileComponent hands a component to the engines in order: its
// images built, live updated where they may be, then deployed. An engine
// that reports a phase (a build running) ends the component's turn.
func (r *DevEnvironmentReconciler) reconcileComponent(ctx context.Context, s *scope, name string, st *v1alpha1.ComponentStatus, w *componentsWalk) error {
	c := s.plan.Components[name]
	ctx = timeline.InComponent(ctx, name)
	say := func(msg string) { r.progress(ctx, s, "component "+name+": "+msg) }
	for _, e := range []engine.Engine{r.Engines.Builds, r.Engines.LiveUpdate} {
		if e == nil {
			continue
		}
		res, err := e.Reconcile(ctx, s.request(c, st, say))
		s.lookAgain(res)
		if err != nil {
			return err
		}
		if res.Phase != "" {
			st.Phase, st.Message = res.Phase, res.Message
			w.inFlight = append(w.inFlight, name)
			return nil
		}
	}
	res, err := r.Engines.Deploy.Reconcile(ctx, s.request(c, st, func(msg string) { r.progress(ctx, s, msg) }))
	s.lookAgain(res)
	if err != nil {
		return err
	}
	liveupdate.Deployed(c, st)
	st.Phase, st.Message = res.Phase, res.Message
	if len(st.Drift) > 0 && r.Recorder != nil {
		r.Recorder.Eventf(s.env, nil, corev1.EventTypeWarning, v1alpha1.ReasonDriftCorrected, "Deploy",
			"%s", message.Truncate("component "+name+": changed by hand, applied again: "+strings.Join(st.Drift, "; "), message.MaxEventNote))
	}
	if c.Deployed() {
		w.deploys = true
	}
	switch res.Phase {
	case v1alpha1.PhaseReady:
	case v1alpha1.PhaseFailed:
		// A workload that failed (a Job out of retries) is the
		// component's failure: a human must change something.
		w.failed = append(w.failed, fault.Stalledf(v1alpha1.ReasonDeployFailed, "component %s: %s", name, res.Message))
	default:
		w.inFlight = append(w.inFlight, name)
	}
	return nil
}

// componentsOutcome is the components step's verdict for summarize:
//   - work in flight anywhere: Reconciling (Waiting), naming it and any
//     failure beside it, looked at again soon;
//   - else a failure that is retried (transient, a registry down): that,
//     so the environment retries with backoff;
//   - else a failure that needs a human: Stalled with its reason;
//   - else components blocked on nothing in flight cannot happen (a
//     dependency that is not Ready is in flight or failed), but is waited
//     for like work in flight.
func (r *DevEnvironmentReconciler) componentsOutcome(s *scope, w *componentsWalk) error {
	var failures error
	if len(w.failed) > 0 {
		failures = componentErrors(w.failed)
	}
	if unpushed := s.sources.Unpushed(s.sourcesOfComponentsOn()); unpushed != nil && len(w.inFlight) == 0 && failures == nil {
		// Nothing else to wait for but a push (what is blocked waits on
		// the components that wait for it): the push's own message, as
		// before any component could start.
		return unpushed
	}
	if len(w.inFlight) > 0 || (len(w.blocked) > 0 && len(w.failed) == 0) {
		pending := append(append(append([]string{}, w.inFlight...), w.unpushed...), w.blocked...)
		msg := fmt.Sprintf("%d of %d components not Ready: %s", len(pending), len(s.plan.Components), strings.Join(pending, ", "))
		if failures != nil {
			msg += "; " + failures.Error()
		}
		// Builder Jobs and warm builds wake the reconcile when they end,
		// and blocked components wait on the others: only what nothing
		// reports is polled soon.
		after := r.WaitInterval
		if s.next.Poll {
			after = r.rolloutPoll(s, time.Now())
		}
		return &fault.WaitingError{Reason: v1alpha1.ReasonProgressing, RequeueAfter: after, Err: errors.New(msg)}
	}
	if failures != nil {
		var transient, unavailable []error
		for _, err := range w.failed {
			switch o := classifyComponent(err); {
			case o.class == stalling:
			case o.dependencyDown:
				unavailable = append(unavailable, err)
			default:
				transient = append(transient, err)
			}
		}
		switch {
		case len(transient) > 0:
			return failures
		case len(unavailable) > 0:
			return fault.Unavailable(failures)
		}
		return fault.Stalled(classifyComponent(w.failed[0]).reason, failures)
	}
	if w.deploys {
		// Nothing watches the deployed objects: a Ready environment looks
		// again for hand edits to correct, in manifests and releases.
		s.next.RequeueWithin(r.driftInterval())
	}
	return nil
}

// describeDependencies names dependencies with the phase of those that
// failed or are turned off: "b, c (Failed), kwok (Disabled)".
func (s *scope) describeDependencies(names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = n
		if st := s.env.Status.Component(n); st != nil && (st.Phase == v1alpha1.PhaseFailed || st.Phase == v1alpha1.PhaseDisabled) {
			out[i] += " (" + string(st.Phase) + ")"
		}
	}
	return strings.Join(out, ", ")
}

// componentErrors are the failures of several components: one line
// each, joined with "; ", each still reachable by errors.As.
type componentErrors []error

func (e componentErrors) Error() string {
	parts := make([]string, len(e))
	for i, err := range e {
		parts[i] = err.Error()
	}
	return strings.Join(parts, "; ")
}

func (e componentErrors) Unwrap() []error { return e }

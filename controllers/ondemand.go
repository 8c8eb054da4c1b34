package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/message"
)

// offReason says why a component is off, or "" when it is on: turned off
// in the spec (enabled: false), or on demand and not brought up.
func (s *scope) offReason(name string) string {
	c := s.plan.Components[name]
	switch {
	case c == nil:
		return ""
	case c.Enabled != nil && !*c.Enabled:
		return "turned off (enabled: false)"
	case c.OnDemand && !slices.Contains(s.env.UpComponents(), name):
		return fmt.Sprintf("on demand, not brought up (kubectl devloop up %s %s)", s.env.Name, name)
	}
	return ""
}

// turnOff keeps a component that is off Disabled: what it deployed before
// (its status still says what: a release, or an inventory) is removed,
// as for a component dropped from the spec, and nothing is built. A
// failure to remove keeps the status, so the next reconcile tries again.
func (r *DevEnvironmentReconciler) turnOff(ctx context.Context, s *scope, name, reason string, st *v1alpha1.ComponentStatus) error {
	st.WaitingFor = nil
	if st.OwnsObjects() {
		// The deploy engine removes them and clears them from st.
		log.FromContext(ctx).Info("removing what a turned-off component deployed", "component", name)
		if err := r.Engines.Deploy.Finalize(ctx, s.request(s.plan.Components[name], st, nil)); err != nil {
			return fmt.Errorf("removing what it deployed: %w", err)
		}
	}
	st.Phase, st.Message = v1alpha1.PhaseDisabled, reason
	return nil
}

// blockedOnlyByOff says whether every dependency waited on is Disabled or
// itself blocked only by Disabled ones: such a component waits for a
// human (enable it, or `kubectl devloop up`), not for work in flight.
func (s *scope) blockedOnlyByOff(waiting []string, idle []string) bool {
	for _, d := range waiting {
		st := s.env.Status.Component(d)
		if (st == nil || st.Phase != v1alpha1.PhaseDisabled) && !slices.Contains(idle, d) {
			return false
		}
	}
	return true
}

// bringUpForTests is the step after tests: a queued run of a suite that
// depends, directly or transitively, on on-demand components not up adds
// them to the up annotation, so the next reconcile deploys them and the
// run starts once they are Ready. They then stay up until `kubectl
// devloop down`. The annotation is patched with the resourceVersion read
// (a conflict is retried soon), like the trigger annotation.
func (r *DevEnvironmentReconciler) bringUpForTests(ctx context.Context, s *scope) error {
	if s.plan == nil {
		return nil
	}
	up := s.env.UpComponents()
	var add, suites []string
	for _, t := range s.env.Status.Tests {
		if !hasQueuedRun(&t) {
			continue
		}
		for _, d := range s.plan.Graph.Ancestors(t.Name) {
			if c := s.plan.Components[d]; c != nil && c.OnDemand && !slices.Contains(up, d) && !slices.Contains(add, d) {
				add = append(add, d)
				if !slices.Contains(suites, t.Name) {
					suites = append(suites, t.Name)
				}
			}
		}
	}
	if len(add) == 0 {
		return nil
	}
	// A copy: the reply must not replace the status this reconcile decided.
	patched := s.env.DeepCopy()
	if patched.Annotations == nil {
		patched.Annotations = map[string]string{}
	}
	value := v1alpha1.FormatUpList(append(up, add...))
	patched.Annotations[v1alpha1.UpAnnotation] = value
	log.FromContext(ctx).Info("bringing up on-demand components for queued test runs", "components", add)
	err := r.Patch(ctx, patched, client.MergeFromWithOptions(s.env, client.MergeFromWithOptimisticLock{}))
	switch {
	case apierrors.IsConflict(err):
		s.next.RetrySoon()
		return nil
	case err != nil:
		return fmt.Errorf("setting %s=%s: %w", v1alpha1.UpAnnotation, message.Truncate(value, 300), err)
	}
	if r.Recorder != nil {
		r.Recorder.Eventf(s.env, nil, corev1.EventTypeNormal, v1alpha1.ReasonBroughtUp, "BringUp", "%s",
			message.Truncate("bringing up on-demand "+strings.Join(add, ", ")+" for the queued run of "+strings.Join(suites, ", ")+"; they stay up until `kubectl devloop down`", message.MaxEventNote))
	}
	// The rest of this reconcile (status) goes on from what it read; the
	// annotation's change wakes the next one, which deploys them.
	return nil
}

// hasQueuedRun says whether a suite has a run waiting to start.
func hasQueuedRun(t *v1alpha1.TestStatus) bool {
	for _, run := range t.Runs {
		if run.Result == v1alpha1.ResultPending {
			return true
		}
	}
	return false
}

package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/deploy"
	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/internal/metrics"
	"github.com/devloop-dev/devloop/internal/plan"
)

// step is one stage of a reconcile. Steps run in order; the first error
// ends the reconcile and is mapped by resultFor and summarize.
type step struct {
	name string
	run  func(ctx context.Context, s *scope) error
	// always runs the step even after an earlier one ended the reconcile:
	// test requests are recorded (as queued runs, with what they wait
	// for), cancelled and finished while components are still rolling out
	// or have failed.
	always bool
}

// steps is the reconcile, in order: take a trigger annotation into
// pending, check the spec and plan the DAG, resolve sources, bring
// components up in DAG order (build their images, then deploy; those
// turned off are Disabled), run due tests, bring up the on-demand
// components queued test runs need.
func (r *DevEnvironmentReconciler) steps() []step {
	return timed([]step{
		{name: "triggers", run: r.takeTrigger},
		{name: "plan", run: r.planEnvironment},
		{name: "sources", run: r.resolveSources},
		{name: "components", run: func(ctx context.Context, s *scope) error {
			// Unchanged components' objects are read with one LIST per
			// namespace and kind (deploy.WithObjectSnapshots).
			return r.reconcileComponents(deploy.WithObjectSnapshots(ctx), s)
		}},
		{name: "tests", run: r.runTests, always: true},
		{name: "on-demand", run: r.bringUpForTests, always: true},
	})
}

// timed makes each step record its duration in the step histogram
// (devloop_reconcile_step_duration_seconds).
func timed(steps []step) []step {
	for i := range steps {
		run, name := steps[i].run, steps[i].name
		steps[i].run = func(ctx context.Context, s *scope) error {
			defer metrics.ObserveStep(name, time.Now())
			return run(ctx, s)
		}
	}
	return steps
}

// planEnvironment checks what CEL cannot (cycles, templates, references as
// the libraries parse them, operator policy) and builds the DAG.
func (r *DevEnvironmentReconciler) planEnvironment(ctx context.Context, s *scope) error {
	if err := r.Policy.Check(s.env); err != nil {
		return fault.Stalled(v1alpha1.ReasonInvalidSpec, err)
	}
	p, err := plan.Build(&s.env.Spec)
	var cycle *plan.CycleError
	switch {
	case errors.As(err, &cycle):
		return fault.Stalled(v1alpha1.ReasonDependencyCycle, err)
	case err != nil:
		return fault.Stalled(v1alpha1.ReasonInvalidSpec, err)
	}
	s.plan = p
	if err := r.removeDropped(ctx, s, p); err != nil {
		return err
	}
	pruneStatus(s.env, p)
	return nil
}

// removeDropped removes what components no longer in the spec deployed —
// their status still says what: a release, or an inventory — before their
// status entries go. A failure keeps the entry, so the next reconcile tries
// again.
func (r *DevEnvironmentReconciler) removeDropped(ctx context.Context, s *scope, p *plan.Plan) error {
	env := s.env
	for i := range env.Status.Components {
		st := &env.Status.Components[i]
		if _, ok := p.Components[st.Name]; ok || !st.OwnsObjects() {
			continue
		}
		// Status says what it deployed: the engine removes both kinds.
		c := &v1alpha1.Component{Name: st.Name}
		log.FromContext(ctx).Info("removing a component dropped from the spec", "component", st.Name)
		if err := r.Engines.Deploy.Finalize(ctx, s.request(c, st, nil)); err != nil {
			return fmt.Errorf("removing dropped component %s: %w", st.Name, err)
		}
	}
	return nil
}

// pruneStatus drops status entries of components and tests no longer in
// the spec, so status never describes something that is gone. Images are
// dropped here too, not only when their component is next built: one
// moved to another component whose old owner is blocked would otherwise
// be counted twice against the status's total (the spec's 16).
func pruneStatus(env *v1alpha1.DevEnvironment, p *plan.Plan) {
	st := &env.Status
	kept := st.Components[:0]
	for _, c := range st.Components {
		if spec, ok := p.Components[c.Name]; ok {
			c.Images = slices.DeleteFunc(c.Images, func(is v1alpha1.ImageStatus) bool {
				return !slices.ContainsFunc(spec.Images, func(i v1alpha1.ImageSpec) bool { return i.Name == is.Name })
			})
			kept = append(kept, c)
		}
	}
	st.Components = kept
	keptTests := st.Tests[:0]
	for _, t := range st.Tests {
		if _, ok := p.Tests[t.Name]; ok {
			keptTests = append(keptTests, t)
		}
	}
	st.Tests = keptTests
}

// minRolloutPoll is the soonest a rollout is looked at again. A look is a
// whole reconcile (the release read and checked, readiness read, status
// written); in the first second after an upgrade, when the node pulls and
// starts the new pod, more frequent looks measurably delayed that pod on a
// two-core machine, and the pod is rarely Ready sooner anyway.
const minRolloutPoll = time.Second

// rolloutPoll is how soon components that wait for what no event reports
// are looked at again. Nothing watches the deployed objects, and a dev
// loop's new pod is usually Ready within a second or two: a fixed
// WaitInterval (5 s) would leave the environment (and `kubectl devloop
// push`, which waits for it) reporting the rollout seconds after it
// finished. So the interval is a quarter of how long the environment has
// not been Ready, between minRolloutPoll and WaitInterval: a few quick
// looks, then backing off.
func (r *DevEnvironmentReconciler) rolloutPoll(s *scope, now time.Time) time.Duration {
	ceiling := r.WaitInterval
	if ceiling <= 0 {
		ceiling = defaultWaitInterval
	}
	var waited time.Duration
	if c := meta.FindStatusCondition(s.read.Status.Conditions, v1alpha1.ConditionReady); c != nil && c.Status != metav1.ConditionTrue {
		waited = now.Sub(c.LastTransitionTime.Time)
	}
	return min(max(waited/4, minRolloutPoll), ceiling)
}

// DefaultDriftInterval is how often a Ready environment with manifests
// components is reconciled to find and correct hand edits.
const DefaultDriftInterval = 5 * time.Minute

func (r *DevEnvironmentReconciler) driftInterval() time.Duration {
	if r.DriftInterval > 0 {
		return r.DriftInterval
	}
	return DefaultDriftInterval
}

// resolveSources is the sources step: every source turned into an
// immutable reference (internal/source.Resolver), due again when a moving
// one is.
func (r *DevEnvironmentReconciler) resolveSources(ctx context.Context, s *scope) error {
	start := time.Now()
	due, err := s.sources.Resolve(ctx)
	r.Timeline.Sources(s.read, s.env, start, time.Now())
	if due > 0 {
		s.next.RequeueWithin(due)
	}
	return err
}

// takeTrigger is the triggers step: a plain trigger annotation moves into
// pending (the first of the protocol's three writes, see internal/testrun).
func (r *DevEnvironmentReconciler) takeTrigger(ctx context.Context, s *scope) error {
	res, err := r.Engines.Triggers.Reconcile(ctx, s.request(nil, nil, nil))
	s.lookAgain(res)
	return err
}

// runTests is the tests step: test requests recorded, runs started,
// observed and trimmed (internal/testrun).
func (r *DevEnvironmentReconciler) runTests(ctx context.Context, s *scope) error {
	res, err := r.Engines.Tests.Reconcile(ctx, s.request(nil, nil, nil))
	s.lookAgain(res)
	return err
}

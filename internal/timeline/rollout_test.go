package timeline_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/timeline"
)

// builtEnv is observedEnv with web's image built from revision as digest,
// the way the build engine writes it (recordBuilt).
func builtEnv(revision, digest string, phase v1alpha1.ComponentPhase) *v1alpha1.DevEnvironment {
	env := observedEnv(revision, nil, phase)
	ist := &env.Status.Components[0].Images[0]
	ist.Digest, ist.Revision = digest, revision
	return env
}

// ready makes env Ready on its generation, as a reconcile with nothing
// left to wait for writes it.
func ready(env *v1alpha1.DevEnvironment) *v1alpha1.DevEnvironment {
	env.Status.Components[0].Phase = v1alpha1.PhaseReady
	setCondition(env, v1alpha1.ConditionReady, "1/1 components ready")
	return env
}

// beginChange moves env's source from rev1 to rev2 at t0 and records what
// the engines mark of an in-process build and a deploy: Assemble and Push
// of web/web, then Deploy of web ending at t0+2s.
func beginChange(r *timeline.Recorder, env *v1alpha1.DevEnvironment) {
	r.ReconcileStarted("uid", t0)
	r.Sources(builtEnv("dev@sha256:1", "sha256:d1", v1alpha1.PhaseReady), env, t0, t0.Add(100*time.Millisecond))
	r.Record("uid", timeline.Assemble, "web/web", t0.Add(100*time.Millisecond), t0.Add(500*time.Millisecond))
	r.Record("uid", timeline.Push, "web/web", t0.Add(500*time.Millisecond), t0.Add(time.Second))
	r.Record("uid", timeline.Deploy, "web", t0.Add(time.Second), t0.Add(2*time.Second))
}

// expectSteps fails t unless steps are want, name, component, start and
// duration.
func expectSteps(t *testing.T, got, want []timeline.Step) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("steps %+v, want %+v", got, want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Name != w.Name || g.Component != w.Component || !g.Start.Equal(w.Start) || g.Duration != w.Duration {
			t.Errorf("step %d: %s %s from %s for %s, want %s %s from %s for %s", i,
				g.Name, g.Component, g.Start.Sub(t0), g.Duration, w.Name, w.Component, w.Start.Sub(t0), w.Duration)
		}
	}
}

func TestObserveRecordsTheRolloutBetweenDeployAndReady(t *testing.T) {
	r := timeline.NewRecorder()
	// The reconcile that deployed found the Deployment rolling out.
	env := builtEnv("dev@sha256:2", "sha256:d2", v1alpha1.PhaseDeploying)
	beginChange(r, env)
	r.Observe(env, t0.Add(2100*time.Millisecond))
	c := r.Changes("uid")[0]
	if n := len(c.Steps); c.Result != timeline.InFlight || n != 5 || c.Steps[4].Name != timeline.Rollout || c.Steps[4].Duration != 0 {
		t.Fatalf("while rolling out, want a running Rollout after Deploy: %+v", c)
	}
	// Reconciles while it rolls out change nothing.
	r.ReconcileStarted("uid", t0.Add(5*time.Second))
	r.Observe(env, t0.Add(5100*time.Millisecond))
	expectSteps(t, r.Changes("uid")[0].Steps, c.Steps)

	// The reconcile begun at 10s found it rolled out.
	r.ReconcileStarted("uid", t0.Add(10*time.Second))
	r.Observe(ready(env), t0.Add(10300*time.Millisecond))
	c = r.Changes("uid")[0]
	if c.Result != timeline.Serving {
		t.Fatalf("not Serving: %+v", c)
	}
	expectSteps(t, c.Steps, []timeline.Step{
		{Name: timeline.Fetch, Start: t0, Duration: 100 * time.Millisecond},
		{Name: timeline.Assemble, Component: "web/web", Start: t0.Add(100 * time.Millisecond), Duration: 400 * time.Millisecond},
		{Name: timeline.Push, Component: "web/web", Start: t0.Add(500 * time.Millisecond), Duration: 500 * time.Millisecond},
		{Name: timeline.Deploy, Component: "web", Start: t0.Add(time.Second), Duration: time.Second},
		{Name: timeline.Rollout, Component: "web", Start: t0.Add(2 * time.Second), Duration: 8 * time.Second},
		{Name: timeline.Ready, Component: "web", Start: t0.Add(10 * time.Second), Duration: 300 * time.Millisecond},
	})
}

// A Helm action that outlived its reconcile: the Rollout seen running
// meanwhile starts where the Deploy, widened when the action was seen
// done, ends.
func TestObserveStartsTheRolloutWhereAWidenedDeployEnds(t *testing.T) {
	r := timeline.NewRecorder()
	env := builtEnv("dev@sha256:2", "sha256:d2", v1alpha1.PhaseDeploying)
	beginChange(r, env)
	r.Observe(env, t0.Add(2100*time.Millisecond))
	r.ReconcileStarted("uid", t0.Add(4*time.Second))
	r.Record("uid", timeline.Deploy, "web", t0.Add(4*time.Second), t0.Add(6*time.Second))
	r.Observe(env, t0.Add(6100*time.Millisecond))
	r.ReconcileStarted("uid", t0.Add(9*time.Second))
	r.Observe(ready(env), t0.Add(9500*time.Millisecond))
	steps := r.Changes("uid")[0].Steps
	expectSteps(t, steps[3:], []timeline.Step{
		{Name: timeline.Deploy, Component: "web", Start: t0.Add(time.Second), Duration: 5 * time.Second},
		{Name: timeline.Rollout, Component: "web", Start: t0.Add(6 * time.Second), Duration: 3 * time.Second},
		{Name: timeline.Ready, Component: "web", Start: t0.Add(9 * time.Second), Duration: 500 * time.Millisecond},
	})
}

// An image built from a run step's output (its revision is the output's,
// not the change's) that the change pushed rolls out too.
func TestObserveRecordsTheRolloutOfAnImageTheChangePushed(t *testing.T) {
	r := timeline.NewRecorder()
	env := builtEnv("dev@sha256:2", "sha256:d2", v1alpha1.PhaseDeploying)
	env.Status.Components[0].Images[0].Revision = "output@sha256:9"
	beginChange(r, env)
	r.Observe(env, t0.Add(2100*time.Millisecond))
	r.ReconcileStarted("uid", t0.Add(4*time.Second))
	r.Observe(ready(env), t0.Add(4100*time.Millisecond))
	expectSteps(t, r.Changes("uid")[0].Steps[4:], []timeline.Step{
		{Name: timeline.Rollout, Component: "web", Start: t0.Add(2 * time.Second), Duration: 2 * time.Second},
		{Name: timeline.Ready, Component: "web", Start: t0.Add(4 * time.Second), Duration: 100 * time.Millisecond},
	})
}

// What is not a rollout: objects Ready in the reconcile that applied them
// (nothing was awaited), an image the change did not build, an image a
// live update serves in place.
func TestObserveRecordsNoRolloutWhenNoPodsRolledOut(t *testing.T) {
	t.Run("ready at once", func(t *testing.T) {
		r := timeline.NewRecorder()
		env := ready(builtEnv("dev@sha256:2", "sha256:d2", v1alpha1.PhaseReady))
		beginChange(r, env)
		r.Observe(env, t0.Add(2100*time.Millisecond))
		expectNoRollout(t, r, timeline.Deploy)
	})
	t.Run("image of an older revision", func(t *testing.T) {
		r := timeline.NewRecorder()
		// The image is scoped by paths the change did not touch: its
		// build, and its digest, are the previous revision's.
		env := builtEnv("dev@sha256:2", "sha256:d1", v1alpha1.PhaseDeploying)
		env.Status.Components[0].Images[0].Revision = "dev@sha256:1"
		r.ReconcileStarted("uid", t0)
		r.Sources(builtEnv("dev@sha256:1", "sha256:d1", v1alpha1.PhaseReady), env, t0, t0.Add(100*time.Millisecond))
		r.Record("uid", timeline.Deploy, "web", t0.Add(time.Second), t0.Add(2*time.Second))
		r.Observe(env, t0.Add(2100*time.Millisecond))
		r.ReconcileStarted("uid", t0.Add(5*time.Second))
		r.Observe(ready(env), t0.Add(5100*time.Millisecond))
		expectNoRollout(t, r, timeline.Deploy)
	})
	t.Run("live update", func(t *testing.T) {
		r := timeline.NewRecorder()
		// As internal/liveupdate leaves an image synced in place: the
		// templates still run d1, the pods serve d2.
		env := builtEnv("dev@sha256:2", "sha256:d2", v1alpha1.PhaseDeploying)
		ist := &env.Status.Components[0].Images[0]
		ist.TemplateDigest, ist.LiveDigest, ist.LastUpdate = "sha256:d1", "sha256:d2", v1alpha1.UpdateLive
		beginChange(r, env)
		r.Record("uid", timeline.LiveUpdate, "web/web", t0.Add(2*time.Second), t0.Add(2500*time.Millisecond))
		r.Observe(env, t0.Add(2600*time.Millisecond))
		r.ReconcileStarted("uid", t0.Add(5*time.Second))
		r.Observe(ready(env), t0.Add(5100*time.Millisecond))
		expectNoRollout(t, r, timeline.LiveUpdate)
	})
}

// expectNoRollout fails t unless the newest change serves with no Rollout
// step and ends with step before Ready.
func expectNoRollout(t *testing.T, r *timeline.Recorder, before timeline.StepName) {
	t.Helper()
	c := r.Changes("uid")[0]
	if c.Result != timeline.Serving {
		t.Fatalf("not Serving: %+v", c)
	}
	n := len(c.Steps)
	for _, s := range c.Steps {
		if s.Name == timeline.Rollout {
			t.Fatalf("a Rollout recorded: %+v", c.Steps)
		}
	}
	if n < 2 || c.Steps[n-2].Name != before || c.Steps[n-1].Name != timeline.Ready {
		t.Fatalf("steps %+v, want %s then Ready last", c.Steps, before)
	}
}

// A rollout that fails ends with its change.
func TestObserveEndsARolloutThatFailed(t *testing.T) {
	r := timeline.NewRecorder()
	env := builtEnv("dev@sha256:2", "sha256:d2", v1alpha1.PhaseDeploying)
	beginChange(r, env)
	r.Observe(env, t0.Add(2100*time.Millisecond))
	env.Status.Components[0].Phase = v1alpha1.PhaseFailed
	setCondition(env, v1alpha1.ConditionStalled, "component web: failed: deployments.apps/web: ProgressDeadlineExceeded")
	r.ReconcileStarted("uid", t0.Add(time.Minute))
	r.Observe(env, t0.Add(time.Minute+time.Second))
	c := r.Changes("uid")[0]
	if c.Result != timeline.Failed {
		t.Fatalf("not Failed: %+v", c)
	}
	last := c.Steps[len(c.Steps)-1]
	if last.Name != timeline.Rollout || !last.Start.Equal(t0.Add(2*time.Second)) || last.Duration != time.Minute-2*time.Second {
		t.Fatalf("Rollout %+v, want from 2s until the reconcile that found it failed began, at 60s", last)
	}
}

// A transient error (Reconciling with the error, Ready False, not
// Stalled) is retried: the change stays in flight, and serves once a
// later reconcile gets through.
func TestObserveKeepsAChangeInFlightThroughATransientError(t *testing.T) {
	r := timeline.NewRecorder()
	env := builtEnv("dev@sha256:2", "sha256:d2", v1alpha1.PhaseDeploying)
	beginChange(r, env)
	msg := "retrying after error: helm release ns/web (attempt 1 of 3): context deadline exceeded"
	env.Status.Conditions = []metav1.Condition{
		{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonReconcileError, Message: msg},
		{Type: v1alpha1.ConditionReconciling, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonReconcileError, Message: msg},
	}
	r.Observe(env, t0.Add(3*time.Second))
	if c := r.Changes("uid")[0]; c.Result != timeline.InFlight || c.Message != "" {
		t.Fatalf("after a transient error: %+v", c)
	}
	env.Status.Conditions = nil
	r.Observe(ready(env), t0.Add(20*time.Second))
	if c := r.Changes("uid")[0]; c.Result != timeline.Serving {
		t.Fatalf("after the retry got through: %+v", c)
	}
}

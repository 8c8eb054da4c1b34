package timeline_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/timeline"
)

// observedEnv is an environment whose source moved to revision, with
// component web's image built by a builder run from start to end.
func observedEnv(revision string, build *v1alpha1.BuildStatus, phase v1alpha1.ComponentPhase) *v1alpha1.DevEnvironment {
	env := &v1alpha1.DevEnvironment{ObjectMeta: metav1.ObjectMeta{Name: "web", UID: "uid", Generation: 2}}
	env.Spec.Sources = []v1alpha1.Source{{Name: "app"}}
	env.Status.ObservedGeneration = 2
	env.Status.Sources = []v1alpha1.SourceStatus{{Name: "app", Revision: revision}}
	env.Status.Components = []v1alpha1.ComponentStatus{{Name: "web", Phase: phase,
		Images: []v1alpha1.ImageStatus{{Name: "web", Build: build}}}}
	return env
}

func setCondition(env *v1alpha1.DevEnvironment, typ, msg string) {
	env.Status.Conditions = append(env.Status.Conditions, metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Message: msg})
}

func TestObserveRecordsTheBuilderRunAndServing(t *testing.T) {
	r := timeline.NewRecorder()
	read := observedEnv("dev@sha256:1", nil, v1alpha1.PhaseReady)
	// The sources step moved the revision; a builder Job starts.
	running := &v1alpha1.BuildStatus{Job: "web-build", Result: v1alpha1.BuildRunning, StartTime: &metav1.Time{Time: t0.Add(time.Second)}}
	env := observedEnv("dev@sha256:2", running, v1alpha1.PhaseBuilding)
	r.Sources(read, env, t0, t0.Add(100*time.Millisecond))
	r.Observe(env, t0.Add(2*time.Second))
	c := r.Changes("uid")[0]
	if c.Result != timeline.InFlight || len(c.Steps) != 2 || c.Steps[1].Name != timeline.Compile || c.Steps[1].Duration != 0 {
		t.Fatalf("while the build runs: %+v", c)
	}
	// The Job ended; a later reconcile deployed and saw web Ready.
	done := running.DeepCopy()
	done.Result, done.CompletionTime = v1alpha1.BuildSucceeded, &metav1.Time{Time: t0.Add(31 * time.Second)}
	env = observedEnv("dev@sha256:2", done, v1alpha1.PhaseReady)
	setCondition(env, v1alpha1.ConditionReady, "1/1 components ready")
	r.Observe(env, t0.Add(33*time.Second))
	c = r.Changes("uid")[0]
	if c.Result != timeline.Serving || c.Serving == nil || !c.Serving.Equal(t0.Add(33*time.Second)) {
		t.Fatalf("not Serving at 33s: %+v", c)
	}
	want := []timeline.Step{
		{Name: timeline.Fetch, Start: t0, Duration: 100 * time.Millisecond},
		{Name: timeline.Compile, Component: "web/web", Start: t0.Add(time.Second), Duration: 30 * time.Second},
		{Name: timeline.Ready, Component: "web", Start: t0.Add(31 * time.Second), Duration: 2 * time.Second},
	}
	if len(c.Steps) != len(want) {
		t.Fatalf("steps %+v, want %+v", c.Steps, want)
	}
	for i := range want {
		if !c.Steps[i].Start.Equal(want[i].Start) || c.Steps[i].Name != want[i].Name || c.Steps[i].Component != want[i].Component || c.Steps[i].Duration != want[i].Duration {
			t.Errorf("step %d: %+v, want %+v", i, c.Steps[i], want[i])
		}
	}
	// Nothing more happens to a change that serves.
	r.Observe(env, t0.Add(time.Hour))
	if got := r.Changes("uid")[0]; !got.Serving.Equal(*c.Serving) || len(got.Steps) != len(c.Steps) {
		t.Fatalf("changed after serving: %+v", got)
	}
}

func TestObserveFailsAChangeOnStalledOrAFailedBuild(t *testing.T) {
	r := timeline.NewRecorder()
	read := observedEnv("dev@sha256:1", nil, v1alpha1.PhaseReady)
	failed := &v1alpha1.BuildStatus{Job: "web-build", Result: v1alpha1.BuildFailed,
		StartTime: &metav1.Time{Time: t0.Add(time.Second)}, CompletionTime: &metav1.Time{Time: t0.Add(5 * time.Second)}}
	env := observedEnv("dev@sha256:2", failed, v1alpha1.PhaseFailed)
	r.Sources(read, env, t0, t0)
	r.Observe(env, t0.Add(6*time.Second))
	if c := r.Changes("uid")[0]; c.Result != timeline.Failed || c.Message != "image web/web: build failed" {
		t.Fatalf("after a failed build: %+v", c)
	}

	// A build from before the change does not fail it; Stalled does.
	read = env
	env = observedEnv("dev@sha256:3", failed, v1alpha1.PhaseFailed)
	r.Sources(read, env, t0.Add(time.Minute), t0.Add(time.Minute))
	r.Observe(env, t0.Add(time.Minute))
	if c := r.Changes("uid")[0]; c.Result != timeline.InFlight {
		t.Fatalf("failed by an older build: %+v", c)
	}
	setCondition(env, v1alpha1.ConditionStalled, "spec.components[0].manifests.paths: no such directory")
	r.Observe(env, t0.Add(time.Minute))
	if c := r.Changes("uid")[0]; c.Result != timeline.Failed || c.Message != "spec.components[0].manifests.paths: no such directory" {
		t.Fatalf("after Stalled: %+v", c)
	}
}

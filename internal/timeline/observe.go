package timeline

import (
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// Sources begins a change when the sources step moved a source's revision:
// read is the environment as the reconcile read it, env after the step,
// and fetchStart when the step began (the Fetch step; an in-process
// build's fetch of the content widens it through Mark). Several sources
// moved at once make one change (names joined by ",", revisions by " ").
//
// A revision also counts as moved when the newest change recorded for the
// source carries another: the process died after writing status but
// before writing the timeline, and the next reconcile still records it.
// An environment with no history of the source (the timeline is new) is
// not given a change for what it already ran.
func (r *Recorder) Sources(read, env *v1alpha1.DevEnvironment, fetchStart, now time.Time) {
	if r == nil {
		return
	}
	var names, revisions []string
	for _, st := range env.Status.Sources {
		if st.Revision == "" || isOutput(env, st.Name) {
			continue
		}
		was := ""
		if old := read.Status.Source(st.Name); old != nil {
			was = old.Revision
		}
		if was != st.Revision || r.recordedOther(env, st.Name, st.Revision) {
			names, revisions = append(names, st.Name), append(revisions, st.Revision)
		}
	}
	if len(names) == 0 {
		return
	}
	started, client := fetchStart, []Step(nil)
	if p, ok := ParsePushed(env.Annotations[PushedAnnotation]); ok && p.Matches(env, names) {
		started, client = p.At, p.Steps()
	}
	r.Begin(env.UID, strings.Join(names, ","), strings.Join(revisions, " "), started, client)
	r.Record(env.UID, Fetch, "", fetchStart, now)
}

func isOutput(env *v1alpha1.DevEnvironment, name string) bool {
	for _, s := range env.Spec.Sources {
		if s.Name == name {
			return s.Output != nil
		}
	}
	return false
}

// recordedOther reports whether the newest change recorded for source
// carries a revision other than revision.
func (r *Recorder) recordedOther(env *v1alpha1.DevEnvironment, source, revision string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.envs[env.UID]
	if !ok {
		return false
	}
	for _, c := range t.changes {
		names, revs := strings.Split(c.Source, ","), strings.Split(c.Revision, " ")
		for i, n := range names {
			if n == source && i < len(revs) {
				return revs[i] != revision
			}
		}
	}
	return false
}

// Observe records, at the end of a reconcile, what only status tells of
// the change in flight: each image's builder run (Compile, from the
// builder Job's or warm build's start and completion), each deployed
// component's rollout to the change's new image (Rollout, rollout.go),
// each touched component's wait until Ready, and the end — Serving once
// the environment is Ready on its generation, Failed once it is Stalled
// or a build of the change failed. An error the reconcile retries
// (Reconciling, not Stalled) leaves the change in flight.
func (r *Recorder) Observe(env *v1alpha1.DevEnvironment, now time.Time) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.envs[env.UID]
	if !ok {
		return
	}
	c := t.inFlight()
	if c == nil {
		return
	}
	// Builds are compared on the operator's clock: the change's first
	// step the operator measured (Started may be the client's).
	since := c.Started
	for _, s := range c.Steps {
		if s.Name == Fetch {
			since = s.Start
		}
	}
	failed := ""
	for i := range env.Status.Components {
		cs := &env.Status.Components[i]
		for _, ist := range cs.Images {
			b := ist.Build
			if b == nil || b.StartTime == nil || b.StartTime.Time.Before(since.Add(-time.Second)) {
				continue
			}
			end := b.StartTime.Time
			if b.CompletionTime != nil && b.CompletionTime.After(end) {
				end = b.CompletionTime.Time
			}
			r.recordLocked(t, Compile, cs.Name+"/"+ist.Name, b.StartTime.Time, end)
			if b.Result == v1alpha1.BuildFailed && failed == "" {
				failed = "image " + cs.Name + "/" + ist.Name + ": build failed"
			}
		}
		t.observeRollout(cs)
		if cs.Ready() {
			readyAfter(r, t, cs.Name, now)
		}
	}
	switch ready, stalled := condition(env, v1alpha1.ConditionReady), condition(env, v1alpha1.ConditionStalled); {
	case stalled != nil:
		t.finish(Failed, now, stalled.Message)
	case failed != "":
		t.finish(Failed, now, failed)
	case ready != nil && env.Status.ObservedGeneration == env.Generation:
		t.finish(Serving, now, "")
	}
}

// readyAfter records the Ready step of a component the change touched
// (it has steps of its own) and that has none yet: from the end of its
// last step to now. Callers hold mu.
func readyAfter(r *Recorder, t *envTimeline, component string, now time.Time) {
	c := t.inFlight()
	var last time.Time
	touched := false
	for _, s := range c.Steps {
		if s.Component != component && !strings.HasPrefix(s.Component, component+"/") {
			continue
		}
		if s.Name == Ready {
			return
		}
		touched = true
		if e := s.Start.Add(s.Duration); e.After(last) {
			last = e
		}
	}
	if touched {
		r.recordLocked(t, Ready, component, last, now)
	}
}

// condition returns env's condition typ when it is True.
func condition(env *v1alpha1.DevEnvironment, typ string) *metav1.Condition {
	c := meta.FindStatusCondition(env.Status.Conditions, typ)
	if c == nil || c.Status != metav1.ConditionTrue {
		return nil
	}
	return c
}

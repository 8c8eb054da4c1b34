package timeline

import (
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// MaxMessage bounds a failed change's message.
const MaxMessage = 256

// Recorder keeps, in memory, each environment's timeline as it grows:
// engines add step times through the context (Step), the reconciler
// begins changes when a source revision moves (Begin), observes what only
// status says (Observe) and writes the timeline once per reconcile only
// when something changed (Flush). Every method is safe on a nil Recorder
// (it records nothing).
type Recorder struct {
	mu   sync.Mutex
	envs map[types.UID]*envTimeline
}

// envTimeline is one environment's timeline and what is known of its
// ConfigMap.
type envTimeline struct {
	changes []Change // newest first, at most MaxChanges
	// loaded is true once the ConfigMap was read (or found absent): until
	// then a write would lose the history written before a restart.
	loaded bool
	// dirty is true when changes differ from what was last written.
	dirty bool
	// foreign is true when a ConfigMap of the timeline's name exists that
	// the environment does not control: it is never written, and looked
	// at again only when there is something to write (it may be gone).
	foreign bool
	// told is true once ErrForeign was returned: it is said once.
	told bool
	// began is when the reconcile running now began (ReconcileStarted):
	// a rollout that reconcile finds done ended by then (rollout.go).
	began time.Time
}

// NewRecorder makes an empty recorder.
func NewRecorder() *Recorder {
	return &Recorder{envs: map[types.UID]*envTimeline{}}
}

// env returns uid's timeline, made on first use. Callers hold mu.
func (r *Recorder) env(uid types.UID) *envTimeline {
	t, ok := r.envs[uid]
	if !ok {
		t = &envTimeline{}
		r.envs[uid] = t
	}
	return t
}

// Forget drops what the recorder holds of a deleted environment.
func (r *Recorder) Forget(uid types.UID) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.envs, uid)
}

// Changes returns a copy of uid's timeline, newest first.
func (r *Recorder) Changes(uid types.UID) []Change {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.envs[uid]
	if !ok {
		return nil
	}
	return cloneChanges(t.changes)
}

func cloneChanges(in []Change) []Change {
	out := make([]Change, len(in))
	for i, c := range in {
		c.Steps = slices.Clone(c.Steps)
		if c.Serving != nil {
			s := *c.Serving
			c.Serving = &s
		}
		out[i] = c
	}
	return out
}

// Begin starts a change: source (or several, comma-separated, that moved
// in the same reconcile) now at revision, begun at started, with the steps
// the client measured before the operator saw it (Pack, Upload). A change
// already recorded under the same source and revision is not begun again
// (a reconcile after a restart, a revision that moved back is a new
// change only when another came between). Every change still in flight is
// Superseded: the new revision replaces what it was carrying.
func (r *Recorder) Begin(uid types.UID, source, revision string, started time.Time, client []Step) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.env(uid)
	if len(t.changes) > 0 && t.changes[0].Source == source && t.changes[0].Revision == revision {
		return
	}
	for i := range t.changes {
		if t.changes[i].Result == InFlight {
			t.changes[i].Result = Superseded
		}
	}
	c := Change{Source: bound(source, 512), Revision: bound(revision, 512), Started: started.UTC(), Result: InFlight}
	for _, s := range client {
		c.Steps = addStep(c.Steps, s)
	}
	t.changes = append([]Change{c}, t.changes...)
	if len(t.changes) > MaxChanges {
		t.changes = t.changes[:MaxChanges]
	}
	t.dirty = true
}

// Record adds a step of the change in flight, from start to end (end
// zero or before start: running). A step already recorded under the same
// name and component is widened to cover both, so a step measured across
// reconciles (a Helm action that outlived one, a build observed again)
// stays one step. Without a change in flight nothing is recorded: a
// drift correction or a spec edit is not a change.
func (r *Recorder) Record(uid types.UID, name StepName, component string, start, end time.Time) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, ok := r.envs[uid]; ok {
		r.recordLocked(t, name, component, start, end)
	}
}

// recordLocked is Record with mu held.
func (r *Recorder) recordLocked(t *envTimeline, name StepName, component string, start, end time.Time) {
	c := t.inFlight()
	if c == nil {
		return
	}
	s := Step{Name: name, Component: bound(component, 253), Start: start.UTC()}
	if end.After(start) {
		s.Duration = end.Sub(start)
	}
	before := slices.Clone(c.Steps)
	c.Steps = addStep(c.Steps, s)
	if !slices.Equal(before, c.Steps) {
		t.dirty = true
	}
}

// addStep merges s into steps (same name and component: the span of
// both) or inserts it in start order; beyond MaxSteps it is dropped.
func addStep(steps []Step, s Step) []Step {
	for i := range steps {
		o := &steps[i]
		if o.Name != s.Name || o.Component != s.Component {
			continue
		}
		start, end := o.Start, o.Start.Add(o.Duration)
		if s.Start.Before(start) {
			start = s.Start
		}
		if e := s.Start.Add(s.Duration); e.After(end) {
			end = e
		}
		o.Start, o.Duration = start, end.Sub(start)
		sortSteps(steps)
		return steps
	}
	if len(steps) >= MaxSteps {
		return steps
	}
	steps = append(steps, s)
	sortSteps(steps)
	return steps
}

// sortSteps keeps steps in the order they started; steps that started
// together keep the order they were recorded in.
func sortSteps(steps []Step) {
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].Start.Before(steps[j].Start) })
}

// finish ends the change in flight with result at when. Callers hold mu.
func (t *envTimeline) finish(result Result, at time.Time, msg string) {
	if len(t.changes) == 0 || t.changes[0].Result != InFlight {
		return
	}
	c := &t.changes[0]
	c.Result = result
	c.Message = bound(msg, MaxMessage)
	if result == Serving {
		at = at.UTC()
		c.Serving = &at
	}
	t.dirty = true
}

// inFlight is the change in flight, or nil. Callers hold mu.
func (t *envTimeline) inFlight() *Change {
	if len(t.changes) == 0 || t.changes[0].Result != InFlight {
		return nil
	}
	return &t.changes[0]
}

// bound cuts s to at most n bytes, dropping a rune cut in two.
func bound(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}

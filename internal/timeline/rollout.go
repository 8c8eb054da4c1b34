package timeline

import (
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// The Rollout step is a component's wait for its workloads to run the
// change's new image. No engine can mark it: the deploy engine returns
// once it applied, and a later reconcile's readiness check (kstatus
// Current) finds the rollout done. So Observe keeps it from status:
//
//   - a component the change deployed (it has a Deploy step) that runs an
//     image the change built (images[].revision is one of the change's,
//     or the change pushed it) and that no live update serves in place,
//     found not Ready at the end
//     of a reconcile, is rolling out: its Rollout runs from the end of
//     its Deploy (which a Helm action still in flight moves on);
//   - the reconcile that finds it Ready ends the Rollout where that
//     reconcile began (ReconcileStarted): as far as the operator can
//     tell, the rollout was over by then. The rest of that reconcile, to
//     the moment Ready was observed, is the component's Ready step. A
//     component found Failed ends its Rollout the same way.
//
// A component Ready in the reconcile that deployed it (objects without
// pods, such as ConfigMaps) awaited nothing: no Rollout. A live update
// neither: its LiveUpdate step is how the image reached the pods.

// ReconcileStarted notes that a reconcile of environment uid began at at;
// the controller calls it at the start of every reconcile.
func (r *Recorder) ReconcileStarted(uid types.UID, at time.Time) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.env(uid).began = at.UTC()
}

// observeRollout keeps component cs's Rollout step of the change in
// flight (see above). Callers hold mu.
func (t *envTimeline) observeRollout(cs *v1alpha1.ComponentStatus) {
	c := t.inFlight()
	deployed, ok := stepEnd(c.Steps, Deploy, cs.Name)
	if !ok || !rollsOut(c, cs) {
		return
	}
	if _, ready := stepEnd(c.Steps, Ready, cs.Name); ready {
		// Ready already: a later Deploying is no rollout of this change's.
		return
	}
	i := slices.IndexFunc(c.Steps, func(s Step) bool { return s.Name == Rollout && s.Component == cs.Name })
	switch {
	case cs.Phase != v1alpha1.PhaseReady && cs.Phase != v1alpha1.PhaseFailed:
		t.setStep(i, Step{Name: Rollout, Component: cs.Name, Start: deployed})
	case i < 0 || c.Steps[i].Duration > 0:
		// Never seen rolling out, or ended already.
	case t.began.After(deployed):
		t.setStep(i, Step{Name: Rollout, Component: cs.Name, Start: deployed, Duration: t.began.Sub(deployed)})
	default:
		// Its Deploy ended in the reconcile that found it Ready (a Helm
		// action seen done and its objects Current at once): nothing
		// was awaited after the Deploy.
		c.Steps = slices.Delete(c.Steps, i, i+1)
		t.dirty = true
	}
}

// rollsOut reports whether component cs runs an image the change c built
// that no live update serves in place: deploying it rolls the pods out.
// An image the change built is one built from a revision the change
// carries, or one the change pushed (built from another source's
// revision: a run step's output the change's build produced).
func rollsOut(c *Change, cs *v1alpha1.ComponentStatus) bool {
	revisions := strings.Fields(c.Revision)
	return slices.ContainsFunc(cs.Images, func(ist v1alpha1.ImageStatus) bool {
		if ist.Digest == "" || ist.ServesLive() {
			return false
		}
		_, pushed := stepEnd(c.Steps, Push, cs.Name+"/"+ist.Name)
		return pushed || (ist.Revision != "" && slices.Contains(revisions, ist.Revision))
	})
}

// stepEnd is when the step named name of component ended (its start,
// for one still running), and whether there is one.
func stepEnd(steps []Step, name StepName, component string) (time.Time, bool) {
	for _, s := range steps {
		if s.Name == name && s.Component == component {
			return s.Start.Add(s.Duration), true
		}
	}
	return time.Time{}, false
}

// setStep puts s at index i of the change in flight's steps, or adds it
// when i < 0 (not beyond MaxSteps), keeping start order. Unlike Record it
// replaces rather than widens: a Rollout's start follows its Deploy's
// end. Callers hold mu.
func (t *envTimeline) setStep(i int, s Step) {
	c := t.inFlight()
	s.Start = s.Start.UTC()
	switch {
	case i < 0 && len(c.Steps) >= MaxSteps:
		return
	case i < 0:
		c.Steps = append(c.Steps, s)
	case c.Steps[i].Start.Equal(s.Start) && c.Steps[i].Duration == s.Duration:
		return
	default:
		c.Steps[i] = s
	}
	sortSteps(c.Steps)
	t.dirty = true
}

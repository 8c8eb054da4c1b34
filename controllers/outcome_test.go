package controllers

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/fault"
)

// TestAnEnginesErrorIsReadOneWay: every class an engine reports at its
// boundary is read by classify alone, and what summarize writes and what
// resultFor asks of controller-runtime agree for each: Stalled is
// Stalled and not requeued; a wait outside is Reconciling on the wait
// schedule; progress is Reconciling after its interval; anything else is
// Reconciling with the error returned for backoff. A stall wins over the
// wait it wraps, a WaitingError over the Unavailable it wraps.
func TestAnEnginesErrorIsReadOneWay(t *testing.T) {
	down := fault.Unavailable(errors.New("registry unavailable: 503"))
	for _, c := range []struct {
		name        string
		err         error
		class       outcomeClass
		reason      string
		stalled     bool
		requeue     bool
		returnedErr bool
	}{
		{"nil", nil, settled, v1alpha1.ReasonSucceeded, false, false, false},
		{"stalled", fault.Stalledf(v1alpha1.ReasonBuildFailed, "image api: denied"), stalling, v1alpha1.ReasonBuildFailed, true, false, false},
		{"stalled around a wait", fault.Stalled(v1alpha1.ReasonSourceFailed, down), stalling, v1alpha1.ReasonSourceFailed, true, false, false},
		{"dependency down", down, waitingOutside, v1alpha1.ReasonWaiting, false, true, false},
		{"dependency down among failures", componentErrors{errors.New("a: failed"), down}, waitingOutside, v1alpha1.ReasonWaiting, false, true, false},
		{"waiting outside", &fault.WaitingError{Reason: v1alpha1.ReasonWaiting, Err: errors.New("tag not pushed yet")}, waitingOutside, v1alpha1.ReasonWaiting, false, true, false},
		{"progress", &fault.WaitingError{Reason: v1alpha1.ReasonProgressing, RequeueAfter: 7 * time.Second, Err: errors.New("rolling out")}, progressing, v1alpha1.ReasonProgressing, false, true, false},
		{"progress around a dependency down", &fault.WaitingError{Reason: v1alpha1.ReasonProgressing, Err: down}, progressing, v1alpha1.ReasonProgressing, false, true, false},
		{"permanent, not stalled by its engine", fault.Permanentf("no such chart"), retrying, v1alpha1.ReasonReconcileError, false, false, true},
		{"plain", fmt.Errorf("conflict"), retrying, v1alpha1.ReasonReconcileError, false, false, true},
	} {
		o := classify(c.err)
		if o.class != c.class {
			t.Errorf("%s: class %d, want %d", c.name, o.class, c.class)
		}
		env := &v1alpha1.DevEnvironment{}
		env.Generation = 3
		summarize(env, c.err)
		ready := meta.FindStatusCondition(env.Status.Conditions, v1alpha1.ConditionReady)
		if ready == nil || ready.Reason != c.reason {
			t.Errorf("%s: Ready %+v, want reason %s", c.name, ready, c.reason)
		}
		if stalled := meta.IsStatusConditionTrue(env.Status.Conditions, v1alpha1.ConditionStalled); stalled != c.stalled {
			t.Errorf("%s: Stalled %v, want %v", c.name, stalled, c.stalled)
		}
		reconciling := meta.IsStatusConditionTrue(env.Status.Conditions, v1alpha1.ConditionReconciling)
		if want := c.err != nil && !c.stalled; reconciling != want {
			t.Errorf("%s: Reconciling %v, want %v", c.name, reconciling, want)
		}
		if ready.Status == metav1.ConditionTrue && c.err != nil {
			t.Errorf("%s: Ready with an error", c.name)
		}
		res, err := resultFor(c.err, time.Minute)
		if (res.RequeueAfter > 0) != c.requeue || (err != nil) != c.returnedErr {
			t.Errorf("%s: requeue after %s, error %v; want requeue %v, error %v", c.name, res.RequeueAfter, err, c.requeue, c.returnedErr)
		}
	}
}

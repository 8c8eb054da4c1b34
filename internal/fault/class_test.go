package fault

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// TestEachKindIsOneOfTheBoundarysClasses: the four kinds an engine
// reports in read as the engine boundary's classes, Stalling or Waiting
// (or neither: retried), in one place; a stall wins over a wait it wraps,
// a WaitingError over the Unavailable it wraps.
func TestEachKindIsOneOfTheBoundarysClasses(t *testing.T) {
	down := Unavailable(errors.New("registry: 503"))
	for _, c := range []struct {
		name string
		err  error
		want Outcome
	}{
		{"nil", nil, Outcome{Class: Settled}},
		{"plain", errors.New("conflict"), Outcome{Class: Retrying}},
		{"permanent, not stalled by its engine", Permanentf("bad"), Outcome{Class: Retrying}},
		{"permanent, stalled where the engine ends", StallPermanent(v1alpha1.ReasonBuildFailed, Permanentf("bad")),
			Outcome{Class: Stalling, Reason: v1alpha1.ReasonBuildFailed}},
		{"stalled", Stalledf(v1alpha1.ReasonDeployFailed, "denied"), Outcome{Class: Stalling, Reason: v1alpha1.ReasonDeployFailed}},
		{"stalled around a dependency down", Stalled(v1alpha1.ReasonSourceFailed, down),
			Outcome{Class: Stalling, Reason: v1alpha1.ReasonSourceFailed, DependencyDown: true}},
		{"unavailable", fmt.Errorf("push: %w", down),
			Outcome{Class: Waiting, Reason: v1alpha1.ReasonWaiting, Outside: true, DependencyDown: true, RetryingDependency: true}},
		{"waiting outside", &WaitingError{Reason: v1alpha1.ReasonWaiting, Err: errors.New("tag not pushed")},
			Outcome{Class: Waiting, Reason: v1alpha1.ReasonWaiting, Outside: true}},
		{"waiting around a dependency down", &WaitingError{Reason: v1alpha1.ReasonWaiting, Err: down},
			Outcome{Class: Waiting, Reason: v1alpha1.ReasonWaiting, Outside: true, DependencyDown: true}},
		{"progressing", &WaitingError{Reason: v1alpha1.ReasonProgressing, RequeueAfter: 7 * time.Second, Err: errors.New("rolling out")},
			Outcome{Class: Waiting, Reason: v1alpha1.ReasonProgressing, After: 7 * time.Second}},
		{"waiting with an interval", &WaitingError{Reason: v1alpha1.ReasonWaiting, RequeueAfter: time.Second, Err: errors.New("turn")},
			Outcome{Class: Waiting, Reason: v1alpha1.ReasonWaiting, After: time.Second}},
	} {
		if got := Classify(c.err); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

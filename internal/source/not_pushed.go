package source

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/fault"
)

// An OCI source's tag that is not in the registry, or a repository that
// does not exist yet, is what every environment fed by `kubectl devloop
// push` sees between `kubectl apply` and the first push: the push is the
// next thing to happen, not a mistake to fix. So it is not Stalled but
// Waiting (kstatus InProgress), looked at again on a schedule, and the
// environment turns Ready once the tag is there, with nobody touching
// it. A digest that is not there, a refused credential or an unknown host
// keep their own classes.

// notPushedError is an OCI tag the registry does not have (yet).
type notPushedError struct {
	repository, tag string
	err             error
}

func (e *notPushedError) Error() string { return e.err.Error() }
func (e *notPushedError) Unwrap() error { return e.err }

// maxPushWait is the longest a source waiting for a push goes unasked:
// a push that does not annotate the environment (a CI job's, say) is
// seen within it.
const maxPushWait = 10 * time.Second

// waitingForPush is the Waiting error of spec.sources[index] while its tag
// is not pushed, and false when that is not why it failed. A
// source that resolved before (its status has a revision) waits for a
// push again, not for the first one.
func waitingForPush(env *v1alpha1.DevEnvironment, index int, err error) (*fault.WaitingError, bool) {
	var np *notPushedError
	if !errors.As(err, &np) {
		return nil, false
	}
	src := env.Spec.Sources[index]
	which := "the first push"
	if st := sourceStatus(env, src.Name); st.Revision != "" {
		which = "a push"
	}
	after := maxPushWait
	if src.Interval != nil && src.Interval.Duration > 0 {
		after = min(after, src.Interval.Duration)
	}
	return &fault.WaitingError{
		Reason:       v1alpha1.ReasonWaiting,
		RequeueAfter: after,
		Err: fmt.Errorf("spec.sources[%d] (%s): waiting for %s to %s:%s (kubectl devloop push)",
			index, src.Name, which, np.repository, np.tag),
	}, true
}

// Unpushed is the Waiting error of those of names whose tag is not pushed
// yet, in the spec's order, or nil when none of them waits. Resolve does
// not stop at such a source: a component reading only pushed sources is
// built and deployed, and one reading an unpushed source waits with this
// error as its message.
func (s *Sources) Unpushed(names []string) *fault.WaitingError {
	if s == nil || len(s.unpushed) == 0 {
		return nil
	}
	var msgs []string
	var after time.Duration
	for _, src := range s.env.Spec.Sources {
		w, ok := s.unpushed[src.Name]
		if !ok || !slices.Contains(names, src.Name) {
			continue
		}
		msgs = append(msgs, w.Error())
		if after == 0 || w.RequeueAfter < after {
			after = w.RequeueAfter
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	return &fault.WaitingError{Reason: v1alpha1.ReasonWaiting, RequeueAfter: after, Err: errors.New(strings.Join(msgs, "; "))}
}

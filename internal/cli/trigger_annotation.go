package cli

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testrun"
)

// setTrigger sets the trigger annotation to value, as `kubectl annotate`
// would, but never over a trigger still pending: it waits until the
// operator consumed that one, then writes with the resourceVersion it read,
// so a trigger set by someone else in between is not clobbered either (the
// write conflicts and is retried). It returns the environment as it was
// just before the write, so callers know which runs existed before.
func (a *app) setTrigger(ctx context.Context, s *session, name, value string, p *progress) (*v1alpha1.DevEnvironment, error) {
	for {
		env, err := s.getEnv(ctx, name)
		if err != nil {
			return nil, err
		}
		if pending := testrun.Unconsumed(env); pending != "" {
			p.show(fmt.Sprintf("waiting: %s is still pending (the operator has not consumed it yet)", pending))
		} else {
			patched := env.DeepCopy()
			if patched.Annotations == nil {
				patched.Annotations = map[string]string{}
			}
			patched.Annotations[v1alpha1.TriggerAnnotation] = value
			err := s.client.Patch(ctx, patched, client.MergeFromWithOptions(env, client.MergeFromWithOptimisticLock{}))
			switch {
			case err == nil:
				return env, nil
			case !apierrors.IsConflict(err):
				return nil, fmt.Errorf("setting %s=%s on devenvironment/%s: %w", v1alpha1.TriggerAnnotation, value, name, err)
			}
			// Changed since read: read again.
			continue
		}
		select {
		case <-ctx.Done():
			return nil, &ExitError{Code: 1, Err: fmt.Errorf("gave up setting trigger=%s: %s", value, p.last)}
		case <-time.After(a.opts.PollInterval):
		}
	}
}

// lastRunNumber is the highest run number a suite has, 0 for none.
func lastRunNumber(env *v1alpha1.DevEnvironment, suite string) int64 {
	var n int64
	if t := env.Status.Test(suite); t != nil {
		for _, r := range t.Runs {
			n = max(n, r.Number)
		}
	}
	return n
}

// newestRunAfter is the newest run of suite numbered above after, or nil.
func newestRunAfter(env *v1alpha1.DevEnvironment, suite string, after int64) *v1alpha1.TestRun {
	var newest *v1alpha1.TestRun
	if t := env.Status.Test(suite); t != nil {
		for i := range t.Runs {
			r := &t.Runs[i]
			if r.Number > after && (newest == nil || r.Number > newest.Number) {
				newest = r
			}
		}
	}
	return newest
}

// newestRunWith is the newest run of suite numbered above after with
// these params, or nil.
func newestRunWith(env *v1alpha1.DevEnvironment, suite string, after int64, params []v1alpha1.EnvVar) *v1alpha1.TestRun {
	var newest *v1alpha1.TestRun
	if t := env.Status.Test(suite); t != nil {
		for i := range t.Runs {
			r := &t.Runs[i]
			if r.Number > after && testrun.SameParams(r.Params, params) && (newest == nil || r.Number > newest.Number) {
				newest = r
			}
		}
	}
	return newest
}

// finished says whether a run has its final result.
func finished(r *v1alpha1.TestRun) bool {
	switch r.Result {
	case v1alpha1.ResultPassed, v1alpha1.ResultFailed, v1alpha1.ResultTimedOut, v1alpha1.ResultCancelled, v1alpha1.ResultError:
		return true
	}
	return false
}

// runState is a run in one phrase: "unit #3 Running (job unit-3)".
func runState(suite string, r *v1alpha1.TestRun) string {
	res := string(r.Result)
	if res == "" {
		res = string(v1alpha1.ResultPending)
	}
	s := fmt.Sprintf("%s #%d %s", suite, r.Number, res)
	if r.ExitCode != nil && finished(r) {
		s += fmt.Sprintf(" (exit %d)", *r.ExitCode)
		if c := resultCounts(r.Results); c != "" {
			s = s[:len(s)-1] + "; " + c + ")"
		}
	} else if r.JobName != "" {
		s += " (job " + r.JobName + ")"
	}
	return s
}

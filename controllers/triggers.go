package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testrun"
)

// A trigger annotation is handled exactly once, across crashes and a
// lagging cache, in three writes:
//
//  1. takeTrigger moves `trigger=<v>` into devloop.dev/trigger-pending,
//     tagged with the resourceVersion it was seen at, in one patch that
//     only applies to that very version (optimistic lock): two reconciles
//     cannot both take it, and a user annotating again after the move
//     makes a new request.
//  2. The tests step records the runs it asks for in status together with
//     that id (status.lastHandledTriggerID), again with an optimistic lock.
//  3. The pending annotation is removed (a JSON patch that first tests its
//     value).
//
// A crash after 1 leaves the pending annotation: it is recorded later. A
// crash after 2 leaves it too, but its id is already in status: it is only
// removed. Token triggers (`<suites>@<token>`) are never moved: status
// records the value handled per key, in the same locked write as the runs.

// pendingTrigger is the value of devloop.dev/trigger-pending.
type pendingTrigger struct {
	ID    string `json:"id"`
	Key   string `json:"key"`
	Value string `json:"value"`
}

var triggerKeys = []string{v1alpha1.TriggerAnnotation, v1alpha1.TriggerAnnotationPrefixed}

func isTokenTrigger(v string) bool { return strings.Contains(v, "@") }

// takeTrigger is step 1: it moves a plain trigger annotation into
// pending. One request is pending at a time; the next is taken once the
// pending one is recorded.
func (r *DevEnvironmentReconciler) takeTrigger(ctx context.Context, s *scope) error {
	env := s.env
	if _, ok := env.Annotations[v1alpha1.TriggerPendingAnnotation]; ok {
		return nil
	}
	for _, key := range triggerKeys {
		v, ok := env.Annotations[key]
		if !ok || isTokenTrigger(v) {
			continue
		}
		data, err := json.Marshal(pendingTrigger{ID: env.ResourceVersion, Key: key, Value: v})
		if err != nil {
			return err
		}
		base := env.DeepCopy()
		delete(env.Annotations, key)
		env.Annotations[v1alpha1.TriggerPendingAnnotation] = string(data)
		err = r.Patch(ctx, env, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
		switch {
		case err == nil:
			// env is now the object as stored: the pending annotation
			// and a newer resourceVersion, and the status this reconcile
			// read (the lock proved it current).
			log.FromContext(ctx).V(1).Info("took trigger", "key", key, "value", v, "id", base.ResourceVersion)
			s.wrote()
			return nil
		case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
			*env = *base
			s.retrySoon()
			return nil
		default:
			*env = *base
			return fmt.Errorf("taking the %s annotation: %w", key, err)
		}
	}
	return nil
}

// readPending parses the pending annotation; a value the operator cannot
// read (edited by hand) is dropped with an event rather than wedging every
// later trigger.
func readPending(env *v1alpha1.DevEnvironment) (p pendingTrigger, raw string, ok bool, err error) {
	raw, ok = env.Annotations[v1alpha1.TriggerPendingAnnotation]
	if !ok {
		return p, "", false, nil
	}
	if err := json.Unmarshal([]byte(raw), &p); err != nil || p.ID == "" {
		return p, raw, true, fmt.Errorf("annotation %s=%q is not what the operator wrote; it is dropped", v1alpha1.TriggerPendingAnnotation, raw)
	}
	return p, raw, true, nil
}

// removePending is step 3: it removes the pending annotation if it still
// holds raw.
func (r *DevEnvironmentReconciler) removePending(ctx context.Context, env *v1alpha1.DevEnvironment, raw string) error {
	path := "/metadata/annotations/" + strings.ReplaceAll(v1alpha1.TriggerPendingAnnotation, "/", "~1")
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": path, "value": raw},
		{"op": "remove", "path": path},
	})
	if err != nil {
		return err
	}
	// A copy: the reply's status must not replace what this reconcile has
	// decided since it was committed.
	err = r.Patch(ctx, env.DeepCopy(), client.RawPatch(types.JSONPatchType, patch))
	if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) || apierrors.IsConflict(err) {
		// Gone, or holding something else already: nothing to remove.
		return nil
	}
	return err
}

// tokenHandled reports whether a token trigger value was handled for key.
func tokenHandled(env *v1alpha1.DevEnvironment, key, value string) bool {
	for _, t := range env.Status.HandledTriggerTokens {
		if t == key+"="+value {
			return true
		}
	}
	return false
}

// recordToken remembers the token value handled for key, replacing the
// key's previous one.
func recordToken(env *v1alpha1.DevEnvironment, key, value string) {
	kept := []string{key + "=" + value}
	for _, t := range env.Status.HandledTriggerTokens {
		if !strings.HasPrefix(t, key+"=") {
			kept = append(kept, t)
		}
	}
	env.Status.HandledTriggerTokens = kept
}

// applyTrigger records what a trigger asks for: queued runs or
// cancellations, the TriggerHandled condition, and the events to emit
// once recorded. An unknown suite or label changes nothing else.
func (p *testPass) applyTrigger(key, value string) {
	env := p.s.env
	env.Status.LastHandledTrigger = truncate(value, testrun.MaxValue)
	what := key + "=" + value
	tr, err := testrun.Parse(value)
	var names []string
	if err == nil {
		names, err = tr.Resolve(env.Spec.Tests)
	}
	if err != nil {
		reason := v1alpha1.ReasonInvalidTrigger
		if _, ok := err.(*testrun.UnknownError); ok {
			reason = v1alpha1.ReasonUnknownTestSuite
		}
		p.setTriggerCondition(metav1.ConditionFalse, reason, err.Error())
		msg := err.Error()
		// Emitted once recorded, so a retried reconcile does not repeat it.
		p.notes = append(p.notes, func() { p.event(corev1.EventTypeWarning, reason, "Trigger", msg) })
		return
	}
	var done []string
	for _, name := range names {
		if tr.Cancel {
			done = append(done, p.cancel(name, what))
		} else {
			done = append(done, p.enqueue(name, what))
		}
	}
	p.setTriggerCondition(metav1.ConditionTrue, v1alpha1.ReasonTriggerAccepted, what+": "+strings.Join(done, "; "))
}

func (p *testPass) setTriggerCondition(status metav1.ConditionStatus, reason, msg string) {
	setCondition(p.s.env, v1alpha1.ConditionTriggerHandled, status, reason, truncate(msg, maxEventNote))
}

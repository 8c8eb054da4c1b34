package testrun

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/engine"
	"github.com/devloop-dev/devloop/internal/message"
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

// Triggers is step 1 as an engine of its own (the triggers step runs
// before the spec is planned): it moves a plain trigger annotation into
// pending.
type Triggers struct{ *Engine }

// Reconcile takes a trigger annotation (the engine contract); a write that
// lost a race (a newer version exists) is not a failure, only a stale
// read: it asks to look again soon.
func (t Triggers) Reconcile(ctx context.Context, req engine.Request) (engine.Result, error) {
	var res engine.Result
	retry, err := t.takeTrigger(ctx, req.Env, req.Before)
	if retry {
		res.RetrySoon()
	}
	return res, err
}

// Finalize has nothing to remove: the annotations go with the object.
func (Triggers) Finalize(context.Context, engine.Request) error { return nil }

// takeTrigger moves a plain trigger annotation into pending. One request
// is pending at a time; the next is taken once the pending one is
// recorded. It reports retrySoon when the write lost a race. before is
// updated as engine.Request.Before says.
func (e *Engine) takeTrigger(ctx context.Context, env, before *v1alpha1.DevEnvironment) (retrySoon bool, err error) {
	if _, ok := env.Annotations[v1alpha1.TriggerPendingAnnotation]; ok {
		return false, nil
	}
	for _, key := range TriggerKeys {
		v, ok := env.Annotations[key]
		if !ok || IsToken(v) {
			continue
		}
		data, err := Pending{ID: env.ResourceVersion, Key: key, Value: v}.Encode()
		if err != nil {
			return false, err
		}
		base := env.DeepCopy()
		delete(env.Annotations, key)
		env.Annotations[v1alpha1.TriggerPendingAnnotation] = data
		err = e.Client.Patch(ctx, env, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
		switch {
		case err == nil:
			// env is now the object as stored: the pending annotation
			// and a newer resourceVersion, and the status this reconcile
			// read (the lock proved it current).
			log.FromContext(ctx).V(1).Info("took trigger", "key", key, "value", v, "id", base.ResourceVersion)
			before.ResourceVersion = env.ResourceVersion
			return false, nil
		case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
			*env = *base
			return true, nil
		default:
			*env = *base
			return false, fmt.Errorf("taking the %s annotation: %w", key, err)
		}
	}
	return false, nil
}

// removePending is step 3: it removes the pending annotation if it still
// holds raw.
func (e *Engine) removePending(ctx context.Context, env *v1alpha1.DevEnvironment, raw string) error {
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
	err = e.Client.Patch(ctx, env.DeepCopy(), client.RawPatch(types.JSONPatchType, patch))
	if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) || apierrors.IsConflict(err) {
		// Gone, or holding something else already: nothing to remove.
		return nil
	}
	return err
}

// applyTrigger records what a trigger asks for: queued runs or
// cancellations, the TriggerHandled condition, and the events to emit
// once recorded. An unknown suite or label changes nothing else.
func (p *testPass) applyTrigger(key, value string) {
	env := p.env
	env.Status.LastHandledTrigger = message.Truncate(value, MaxValue)
	what := key + "=" + value
	tr, err := Parse(value)
	var reqs []Request
	if err == nil {
		reqs, err = tr.Requests(env.Spec.Tests)
	}
	if err != nil {
		reason := v1alpha1.ReasonInvalidTrigger
		switch err.(type) {
		case *UnknownError:
			reason = v1alpha1.ReasonUnknownTestSuite
		case *ParamError:
			reason = v1alpha1.ReasonUnknownTestParam
		}
		msg := err.Error()
		if len(value) > MaxValue {
			// Consumed like any refused trigger (a token one is recorded
			// hashed), so it cannot wedge later status writes.
			msg = fmt.Sprintf("annotation %s holds %d bytes; a trigger may have at most %d: it is ignored", key, len(value), MaxValue)
		}
		p.setTriggerCondition(metav1.ConditionFalse, reason, msg)
		// Emitted once recorded, so a retried reconcile does not repeat it.
		p.notes = append(p.notes, func() { p.event(corev1.EventTypeWarning, reason, "Trigger", msg) })
		return
	}
	var done []string
	for _, r := range reqs {
		if tr.Cancel {
			done = append(done, p.cancel(r.Suite, what))
		} else {
			done = append(done, p.enqueue(r.Suite, what, r.Params))
		}
	}
	msg := what + ": " + strings.Join(done, "; ")
	p.setTriggerCondition(metav1.ConditionTrue, v1alpha1.ReasonTriggerAccepted, msg)
	// Every value consumed says so, once recorded: of many raw
	// annotations written at once only the last is seen, and the events
	// say which that was.
	note := message.Truncate(msg, message.MaxEventNote)
	p.notes = append(p.notes, func() { p.event(corev1.EventTypeNormal, v1alpha1.ReasonTriggerAccepted, "Trigger", note) })
}

func (p *testPass) setTriggerCondition(status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&p.env.Status.Conditions, metav1.Condition{
		Type: v1alpha1.ConditionTriggerHandled, Status: status, Reason: reason,
		Message: message.Truncate(msg, message.MaxEventNote), ObservedGeneration: p.env.Generation,
	})
}

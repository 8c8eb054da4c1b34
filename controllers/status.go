package controllers

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/internal/liveupdate"
	"github.com/devloop-dev/devloop/internal/message"
)

// summarize derives the conditions and the printer-column fields from the
// outcome of the steps. It is the only place that sets Ready, Reconciling
// and Stalled, and it keeps them kstatus-conformant:
//   - Ready is always present;
//   - Reconciling and Stalled are never both True; a False one is removed;
//   - observedGeneration is the generation the operator acts on, written
//     with every outcome: kstatus reports Current or Failed for it once
//     done, and InProgress (Reconciling True) while work is under way.
func summarize(env *v1alpha1.DevEnvironment, outcome error) {
	st := &env.Status
	st.ComponentsReady = componentsReady(env)
	st.LastTestResult = st.LatestTestResult()

	o := classify(outcome)
	switch {
	case env.Spec.Suspend:
		// Suspension changes nothing deployed; Ready keeps its status and
		// says why nothing moves.
		status := metav1.ConditionUnknown
		if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady); c != nil {
			status = c.Status
		}
		setReady(env, status, v1alpha1.ReasonSuspended, "reconciliation is suspended (spec.suspend)")
		removeCondition(env, v1alpha1.ConditionReconciling)
		removeCondition(env, v1alpha1.ConditionStalled)
		st.ObservedGeneration = env.Generation
	case o.class == settled:
		setReady(env, metav1.ConditionTrue, v1alpha1.ReasonSucceeded, readyMessage(env))
		removeCondition(env, v1alpha1.ConditionReconciling)
		removeCondition(env, v1alpha1.ConditionStalled)
		st.ObservedGeneration = env.Generation
	case o.class == stalling:
		setReady(env, metav1.ConditionFalse, o.reason, outcome.Error())
		setCondition(env, v1alpha1.ConditionStalled, metav1.ConditionTrue, o.reason, outcome.Error())
		removeCondition(env, v1alpha1.ConditionReconciling)
		st.ObservedGeneration = env.Generation
	case o.class == progressing || (o.class == waitingOutside && !o.retryingDependency):
		setReady(env, metav1.ConditionFalse, o.reason, outcome.Error())
		setCondition(env, v1alpha1.ConditionReconciling, metav1.ConditionTrue, o.reason, outcome.Error())
		removeCondition(env, v1alpha1.ConditionStalled)
		// kstatus reads Reconciling as in progress: the generation the
		// operator is acting on is observed, so status says which.
		st.ObservedGeneration = env.Generation
	case o.class == waitingOutside:
		// Something the environment needs (a registry, a git server) is
		// down: retried on the wait schedule (resultFor), and it heals by
		// itself when it comes back.
		setReady(env, metav1.ConditionFalse, v1alpha1.ReasonWaiting, outcome.Error())
		setCondition(env, v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonWaiting, "retrying: "+outcome.Error())
		removeCondition(env, v1alpha1.ConditionStalled)
		st.ObservedGeneration = env.Generation
	default:
		// A transient failure: it will be retried with backoff, so the
		// environment is still reconciling, not stalled.
		setReady(env, metav1.ConditionFalse, v1alpha1.ReasonReconcileError, outcome.Error())
		setCondition(env, v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonReconcileError, "retrying after error: "+outcome.Error())
		removeCondition(env, v1alpha1.ConditionStalled)
		st.ObservedGeneration = env.Generation
	}
	// The STATUS column: Ready's message in one short sentence; the
	// condition keeps it whole.
	st.Summary = ""
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady); c != nil {
		st.Summary = message.Summary(c.Message)
	}
}

func readyMessage(env *v1alpha1.DevEnvironment) string {
	n := len(env.Spec.Components)
	if n == 0 {
		return "nothing to reconcile: no components"
	}
	return fmt.Sprintf("%d/%d components ready", n, n) + liveupdate.Summary(env)
}

func componentsReady(env *v1alpha1.DevEnvironment) string {
	ready := 0
	for _, c := range env.Status.Components {
		if c.Phase == v1alpha1.PhaseReady {
			ready++
		}
	}
	return fmt.Sprintf("%d/%d", ready, len(env.Spec.Components))
}

func setReady(env *v1alpha1.DevEnvironment, status metav1.ConditionStatus, reason, message string) {
	setCondition(env, v1alpha1.ConditionReady, status, reason, message)
}

func setCondition(env *v1alpha1.DevEnvironment, typ string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&env.Status.Conditions, metav1.Condition{
		Type:               typ,
		Status:             status,
		Reason:             reason,
		Message:            message.Truncate(message.Condense(msg), v1alpha1.MaxConditionMessage),
		ObservedGeneration: env.Generation,
	})
}

func removeCondition(env *v1alpha1.DevEnvironment, typ string) {
	meta.RemoveStatusCondition(&env.Status.Conditions, typ)
}

// progress writes, before a long action (a Helm upgrade with hooks, an
// image build), that the environment is reconciling: Ready False,
// Reconciling True with msg, observedGeneration current. Status is
// otherwise written when the reconcile ends, and until then kubectl wait,
// the plugin and Flux would read the last outcome — Ready — while the
// action runs. A failed write is only logged: the final one follows.
//
// The write is sent beside the action, not before it: the patch is made
// here, from the status as it is now, and sent by its own goroutine, so a
// change's build and live update do not wait a round trip to the API
// server for it (issue 46's hot path). Whatever writes the environment
// next — the next progress, a step (the trigger and test-run engines
// write it with an optimistic lock), the final status — waits for it
// first (settleProgress), so the writes reach the API server in the
// order they were made and each is computed against what is stored.
func (r *DevEnvironmentReconciler) progress(ctx context.Context, s *scope, msg string) {
	s.settleProgress(ctx)
	// What is stored already reads in progress for this generation (a
	// rollout, a retry): it stays as it is, with its more telling message.
	if c := meta.FindStatusCondition(s.before.Status.Conditions, v1alpha1.ConditionReconciling); c != nil &&
		c.Status == metav1.ConditionTrue && s.before.Status.ObservedGeneration == s.env.Generation {
		return
	}
	summarize(s.env, &fault.WaitingError{Reason: v1alpha1.ReasonProgressing, Err: errors.New(message.Truncate(msg, 1024))})
	// A copy is sent: engines hold pointers into s.env's status while
	// they run, and the reply is decoded into what was sent.
	written := s.env.DeepCopy()
	written.Status.Bound()
	data, err := client.MergeFrom(s.before).Data(written)
	if err != nil {
		log.FromContext(ctx).V(1).Info("could not write progress", "error", err.Error())
		return
	}
	w := &progressWrite{done: make(chan struct{}), base: s.before.DeepCopy()}
	// What will be stored is the base of the next status write: the
	// final patch must undo what this one says. settleProgress puts the
	// old base back if the write fails.
	*s.before = *written.DeepCopy()
	s.progressing = w
	go func() {
		defer close(w.done)
		if w.err = r.Status().Patch(ctx, written, client.RawPatch(types.MergePatchType, data)); w.err == nil {
			w.resourceVersion = written.ResourceVersion
		}
	}()
}

// progressWrite is a progress write on its way to the API server.
type progressWrite struct {
	done chan struct{}
	// base is what was stored before it, put back if it fails.
	base            *v1alpha1.DevEnvironment
	err             error
	resourceVersion string
}

// settleProgress waits for the progress write in flight, if any, and
// makes what it stored (or, when it failed, what was stored before it)
// the base of the next write.
func (s *scope) settleProgress(ctx context.Context) {
	w := s.progressing
	if w == nil {
		return
	}
	s.progressing = nil
	<-w.done
	if w.err != nil {
		log.FromContext(ctx).V(1).Info("could not write progress", "error", w.err.Error())
		*s.before = *w.base
		return
	}
	s.env.ResourceVersion = w.resourceVersion
	s.before.ResourceVersion = w.resourceVersion
}

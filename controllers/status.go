package controllers

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/internal/message"
)

// summarize derives the conditions and the printer-column fields from the
// outcome of the steps. It is the only place that sets Ready, Reconciling
// and Stalled, and it keeps them kstatus-conformant:
//   - Ready is always present;
//   - Reconciling and Stalled are never both True; a False one is removed;
//   - observedGeneration advances on success and on a terminal error, so
//     kstatus reports Current or Failed for this generation, and
//     InProgress while work is still under way.
func summarize(env *v1alpha1.DevEnvironment, outcome error) {
	st := &env.Status
	st.ComponentsReady = componentsReady(env)
	st.LastTestResult = st.LatestTestResult()

	stalling, waiting := fault.AsStalled(outcome), fault.AsWaiting(outcome)
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
	case outcome == nil:
		setReady(env, metav1.ConditionTrue, v1alpha1.ReasonSucceeded, readyMessage(env))
		removeCondition(env, v1alpha1.ConditionReconciling)
		removeCondition(env, v1alpha1.ConditionStalled)
		st.ObservedGeneration = env.Generation
	case stalling != nil:
		setReady(env, metav1.ConditionFalse, stalling.Reason, outcome.Error())
		setCondition(env, v1alpha1.ConditionStalled, metav1.ConditionTrue, stalling.Reason, outcome.Error())
		removeCondition(env, v1alpha1.ConditionReconciling)
		st.ObservedGeneration = env.Generation
	case waiting != nil:
		setReady(env, metav1.ConditionFalse, waiting.Reason, outcome.Error())
		setCondition(env, v1alpha1.ConditionReconciling, metav1.ConditionTrue, waiting.Reason, outcome.Error())
		removeCondition(env, v1alpha1.ConditionStalled)
	case fault.IsUnavailable(outcome):
		// Something the environment needs (a registry, a git server) is
		// down: retried with backoff, and it heals by itself when it
		// comes back.
		setReady(env, metav1.ConditionFalse, v1alpha1.ReasonWaiting, outcome.Error())
		setCondition(env, v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonWaiting, "retrying with backoff: "+outcome.Error())
		removeCondition(env, v1alpha1.ConditionStalled)
	default:
		// A transient failure: it will be retried with backoff, so the
		// environment is still reconciling, not stalled.
		setReady(env, metav1.ConditionFalse, v1alpha1.ReasonReconcileError, outcome.Error())
		setCondition(env, v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonReconcileError, "retrying after error: "+outcome.Error())
		removeCondition(env, v1alpha1.ConditionStalled)
	}
}

func readyMessage(env *v1alpha1.DevEnvironment) string {
	n := len(env.Spec.Components)
	if n == 0 {
		return "nothing to reconcile: no components"
	}
	return fmt.Sprintf("%d/%d components ready", n, n)
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
		Message:            message.Truncate(msg, 32*1024),
		ObservedGeneration: env.Generation,
	})
}

func removeCondition(env *v1alpha1.DevEnvironment, typ string) {
	meta.RemoveStatusCondition(&env.Status.Conditions, typ)
}

package controllers

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// recordTransition tells what changed in Ready, once per change:
//   - Stalled: a Warning event with the stalled reason, when the reason
//     changes (a registry host that does not resolve is tried again every
//     few seconds; its event came every minute);
//   - a wait on something outside (isWait: a registry down, a tag not
//     resolving yet): a Normal event of reason Waiting and an Info log line
//     when the environment starts waiting; later tries only at V(1).
//     Nothing for an operator of the operator to act on: no
//     ReconcileError, no ERROR line;
//   - work in flight (Progressing): nothing; the condition carries it;
//   - any other error: a Warning ReconcileError event when the message
//     changes (controller-runtime logs it as an error);
//   - Ready: a Normal event when it becomes True.
func (r *DevEnvironmentReconciler) recordTransition(ctx context.Context, before, after *v1alpha1.DevEnvironment, outcome error) {
	old := meta.FindStatusCondition(before.Status.Conditions, v1alpha1.ConditionReady)
	now := meta.FindStatusCondition(after.Status.Conditions, v1alpha1.ConditionReady)
	if now == nil {
		return
	}
	reasonChanged := old == nil || old.Status != now.Status || old.Reason != now.Reason
	if isWait(outcome) {
		logger := log.FromContext(ctx)
		if !reasonChanged {
			logger = logger.V(1)
		}
		logger.Info("waiting for a dependency to come back", "reason", now.Reason, "message", now.Message)
	}
	if r.Recorder == nil || (old != nil && old.Status == now.Status && old.Reason == now.Reason && old.Message == now.Message) {
		return
	}
	switch o := classify(outcome); o.class {
	case stalling:
		if wasStalled := meta.FindStatusCondition(before.Status.Conditions, v1alpha1.ConditionStalled); wasStalled == nil ||
			wasStalled.Status != metav1.ConditionTrue || wasStalled.Reason != o.reason {
			r.Recorder.Eventf(after, nil, corev1.EventTypeWarning, o.reason, "Reconcile", "%s", now.Message)
		}
	case waitingOutside:
		if reasonChanged {
			r.Recorder.Eventf(after, nil, corev1.EventTypeNormal, v1alpha1.ReasonWaiting, "Reconcile", "%s", now.Message)
		}
	case progressing:
		// Progress is not news; the condition carries it.
	case retrying:
		r.Recorder.Eventf(after, nil, corev1.EventTypeWarning, v1alpha1.ReasonReconcileError, "Reconcile", "%s", now.Message)
	case settled:
		if now.Status == metav1.ConditionTrue && (old == nil || old.Status != now.Status) {
			r.Recorder.Eventf(after, nil, corev1.EventTypeNormal, now.Reason, "Reconcile", "%s", now.Message)
		}
	}
}

// keepTransitionTimes gives each condition whose status is the one the
// reconcile read the transition time it had then. A progress write during
// the reconcile (before a build) may have replaced Stalled by Reconciling,
// and the final summary set Stalled again with a new time: a stalled
// environment's lastTransitionTime moved on every retry.
func keepTransitionTimes(read, env *v1alpha1.DevEnvironment) {
	for i := range env.Status.Conditions {
		c := &env.Status.Conditions[i]
		if was := meta.FindStatusCondition(read.Status.Conditions, c.Type); was != nil && was.Status == c.Status {
			c.LastTransitionTime = was.LastTransitionTime
		}
	}
}

// notReadyFor is how long env, as read, has not been Ready: what the wait
// schedule grows with.
func notReadyFor(env *v1alpha1.DevEnvironment, now time.Time) time.Duration {
	c := meta.FindStatusCondition(env.Status.Conditions, v1alpha1.ConditionReady)
	if c == nil || c.Status == metav1.ConditionTrue {
		return 0
	}
	return now.Sub(c.LastTransitionTime.Time)
}

package controllers

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/devloop-dev/devloop/internal/timeline"
)

// loadTimeline reads the environment's change timeline back once after a
// start (as the tenant) and makes the engines' step times go to it. It
// notes when the reconcile began: a rollout it finds done ended by then.
func (r *DevEnvironmentReconciler) loadTimeline(ctx context.Context, s *scope) context.Context {
	if r.Timeline == nil || s.env.Spec.Suspend {
		return ctx
	}
	r.Timeline.ReconcileStarted(s.env.UID, time.Now())
	c, err := s.tenant.Client()
	if err == nil {
		err = r.Timeline.Load(ctx, c, s.env)
	}
	r.timelineFailed(ctx, s, err)
	return timeline.WithEnv(ctx, r.Timeline, s.env.UID)
}

// flushTimeline is the timeline's one write: what status says of the
// change in flight observed, and the ConfigMap written as the tenant, only
// when the timeline changed. It never decides the reconcile's outcome.
func (r *DevEnvironmentReconciler) flushTimeline(ctx context.Context, s *scope) {
	if r.Timeline == nil || s.env.Spec.Suspend {
		return
	}
	r.Timeline.Observe(s.env, time.Now())
	c, err := s.tenant.Client()
	if err == nil {
		err = r.Timeline.Flush(ctx, c, s.env)
	}
	r.timelineFailed(ctx, s, err)
}

// timelineFailed says why the timeline is not written: an event for a
// ConfigMap of its name that is not the environment's (once), a log line
// otherwise (tried again at the next reconcile).
func (r *DevEnvironmentReconciler) timelineFailed(ctx context.Context, s *scope, err error) {
	switch {
	case errors.Is(err, timeline.ErrForeign) && r.Recorder != nil:
		r.Recorder.Eventf(s.env, nil, corev1.EventTypeWarning, "TimelineNotWritten", "Record",
			"configmap %s is not this environment's: the change timeline is not written", timeline.ConfigMapName(s.env.Name))
	case apierrors.IsForbidden(err):
		// A ServiceAccount without rights on ConfigMaps has no timeline;
		// that is its team's choice, not news at every reconcile.
		log.FromContext(ctx).V(1).Info("the environment's ServiceAccount may not keep the change timeline", "error", err.Error())
	case err != nil:
		log.FromContext(ctx).Info("could not keep the change timeline", "error", err.Error())
	}
}

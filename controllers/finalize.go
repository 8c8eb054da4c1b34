package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/engine"
	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/internal/message"
	"github.com/devloop-dev/devloop/internal/plan"
)

// DefaultMaxDeletionFailures is how many attempts at removing what a
// deleted environment deployed may fail before the rest is abandoned.
const DefaultMaxDeletionFailures = 6

// deletionRetry is how soon a failed removal is tried again: failures are
// mostly missing rights, which a human fixes, not a backoff.
const deletionRetry = 10 * time.Second

// finalize removes what the environment deployed, in reverse dependency
// order — every component status records, in the spec or not — then lets
// the object go. A removal that fails is reported (Ready False, reason
// DeletionBlocked, a Warning event) and tried again; after
// MaxDeletionFailures attempts, or at once with the abandon-on-delete
// annotation, or when the environment's namespace is going away, the
// rest is abandoned with a Warning event naming it, so a deletion never
// hangs. removeCtx, under the reconcile deadline, bounds the removals;
// ctx the writes that report them.
func (r *DevEnvironmentReconciler) finalize(ctx, removeCtx context.Context, env *v1alpha1.DevEnvironment) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(env, v1alpha1.Finalizer) {
		return ctrl.Result{}, nil
	}
	tenant := r.Identity.For(env)
	var failed []string
	var errs []error
	for _, c := range teardownOrder(env) {
		err := r.Engines.Deploy.Finalize(removeCtx, engine.Request{Env: env, Component: c, Status: env.Status.Component(c.Name), Tenant: tenant})
		if err != nil && removeCtx.Err() != nil && ctx.Err() == nil {
			err = r.cutShort(err)
		}
		if err != nil {
			failed = append(failed, c.Name)
			errs = append(errs, fmt.Errorf("component %s: %w", c.Name, err))
		}
	}
	if len(errs) > 0 {
		cause := componentErrors(errs)
		abandon, why := r.abandonDeletion(ctx, env)
		if !abandon {
			return r.deletionBlocked(ctx, env, cause)
		}
		log.FromContext(ctx).Info("abandoning what could not be removed", "components", failed, "why", why, "error", cause.Error())
		if r.Recorder != nil {
			r.Recorder.Eventf(env, nil, corev1.EventTypeWarning, v1alpha1.ReasonDeletionAbandoned, "Delete", "%s",
				message.Truncate(fmt.Sprintf("%s: stopped removing components %s (whatever of theirs is still in the cluster stays): %s", why, strings.Join(failed, ", "), cause.Error()), message.MaxEventNote))
		}
	}
	// Every engine forgets the environment (a nil component), and so
	// does the sources step.
	for _, e := range r.Engines.All() {
		if err := e.Finalize(ctx, engine.Request{Env: env, Tenant: tenant}); err != nil {
			return ctrl.Result{}, err
		}
	}
	if r.Sources != nil {
		r.Sources.Forget(env.UID)
	}
	r.Timeline.Forget(env.UID)
	patch := client.MergeFrom(env.DeepCopy())
	controllerutil.RemoveFinalizer(env, v1alpha1.Finalizer)
	return ctrl.Result{}, client.IgnoreNotFound(r.Patch(ctx, env, patch))
}

// abandonDeletion says whether what could not be removed is left, and
// why.
func (r *DevEnvironmentReconciler) abandonDeletion(ctx context.Context, env *v1alpha1.DevEnvironment) (bool, string) {
	switch {
	case r.namespaceTerminating(ctx, env.Namespace):
		// The environment's namespace is going away and took the
		// ServiceAccount's rights with it: what is left in that namespace
		// goes with it, and waiting would wedge the namespace's deletion.
		return true, "the environment's namespace is being deleted"
	case env.Annotations[v1alpha1.AbandonOnDeleteAnnotation] == "true":
		return true, "annotation " + v1alpha1.AbandonOnDeleteAnnotation + " is true"
	case env.Status.DeletionFailures+1 >= int32(r.maxDeletionFailures()):
		return true, fmt.Sprintf("removal failed %d times", env.Status.DeletionFailures+1)
	}
	return false, ""
}

// deletionBlocked records a failed removal in status and an event, and
// tries again after deletionRetry.
func (r *DevEnvironmentReconciler) deletionBlocked(ctx context.Context, env *v1alpha1.DevEnvironment, cause error) (ctrl.Result, error) {
	before := env.DeepCopy()
	env.Status.DeletionFailures++
	msg := fmt.Sprintf("deleting: cannot remove what the environment deployed (attempt %d of %d; annotate %s=true to leave it): %s",
		env.Status.DeletionFailures, r.maxDeletionFailures(), v1alpha1.AbandonOnDeleteAnnotation, cause.Error())
	// Not Stalled: the operator acts on its own (it retries, then
	// abandons), so the environment is Reconciling.
	summarize(env, &fault.WaitingError{Reason: v1alpha1.ReasonDeletionBlocked, Err: errors.New(msg)})
	if r.Recorder != nil {
		r.Recorder.Eventf(env, nil, corev1.EventTypeWarning, v1alpha1.ReasonDeletionBlocked, "Delete", "%s", message.Truncate(msg, message.MaxEventNote))
	}
	if err := r.Status().Patch(ctx, env, client.MergeFrom(before)); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("recording a blocked deletion: %w", err)
	}
	return ctrl.Result{RequeueAfter: deletionRetry}, nil
}

func (r *DevEnvironmentReconciler) maxDeletionFailures() int {
	if r.MaxDeletionFailures > 0 {
		return r.MaxDeletionFailures
	}
	return DefaultMaxDeletionFailures
}

// namespaceTerminating reports whether ns is being deleted (or is gone).
func (r *DevEnvironmentReconciler) namespaceTerminating(ctx context.Context, ns string) bool {
	n := &corev1.Namespace{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Name: ns}, n); err != nil {
		return apierrors.IsNotFound(err)
	}
	return !n.DeletionTimestamp.IsZero()
}

// teardownOrder is the reverse DAG order (reverse declaration order when
// the spec does not plan: a cycle must not wedge a deletion), then every
// component status still records that the spec no longer names.
func teardownOrder(env *v1alpha1.DevEnvironment) []*v1alpha1.Component {
	var out []*v1alpha1.Component
	if p, err := plan.Build(&env.Spec); err == nil {
		order := p.ComponentOrder()
		for i := len(order) - 1; i >= 0; i-- {
			out = append(out, p.Components[order[i]])
		}
	} else {
		for i := len(env.Spec.Components) - 1; i >= 0; i-- {
			out = append(out, &env.Spec.Components[i])
		}
	}
	for _, st := range env.Status.Components {
		if env.Spec.Component(st.Name) == nil {
			out = append(out, &v1alpha1.Component{Name: st.Name})
		}
	}
	return out
}

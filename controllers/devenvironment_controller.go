// Package controllers holds the DevEnvironment reconciler: a fixed list of
// steps over a shared scope, typed errors mapped to results in one place,
// and status summarized in one place.
package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	crsource "sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/engine"
	"github.com/devloop-dev/devloop/internal/fairqueue"
	"github.com/devloop-dev/devloop/internal/identity"
	"github.com/devloop-dev/devloop/internal/liveupdate"
	"github.com/devloop-dev/devloop/internal/plan"
	"github.com/devloop-dev/devloop/internal/source"
	"github.com/devloop-dev/devloop/internal/timeline"
)

// DevEnvironmentReconciler reconciles DevEnvironment objects.
type DevEnvironmentReconciler struct {
	client.Client
	Recorder events.EventRecorder

	// Identity is who every request made for an environment acts as.
	Identity Identities
	// Engines do the work, one of each kind (internal/operator makes
	// them); Triggers, Builds, Deploy and Tests are required.
	Engines engine.Set
	// Sources resolves and fetches sources; nil disables the sources step
	// (and with it every image that needs a source).
	Sources SourceResolver
	// Policy is what the operator's flags forbid in a spec.
	Policy plan.Policy
	// WaitInterval is how soon an environment waiting on a rollout or a
	// dependency is looked at again; 5s when zero.
	WaitInterval time.Duration
	// DriftInterval is how often a Ready environment with manifests
	// components is looked at again so hand edits to what it deployed are
	// found and corrected (status shows them, a DriftCorrected event names
	// them); DefaultDriftInterval when zero.
	DriftInterval time.Duration

	// ReconcileTimeout bounds one reconcile's steps (and one deletion's
	// removals), so no environment holds a worker longer: what was cut
	// short goes on at the next reconcile. DefaultReconcileTimeout when
	// zero.
	ReconcileTimeout time.Duration

	// MaxDeletionFailures is how many attempts at removing what a deleted
	// environment deployed may fail before the rest is abandoned;
	// DefaultMaxDeletionFailures when zero.
	MaxDeletionFailures int

	// APIReader reads namespaces straight from the API server.
	APIReader client.Reader

	// NamespaceShare is how many workers the environments of one
	// namespace may hold at once, so one tenant's slow reconciles never
	// hold them all (internal/fairqueue); fairqueue.DefaultShare when zero.
	NamespaceShare int

	// Timeline records each change's step times (internal/timeline);
	// SetupWithManager makes one when nil.
	Timeline *timeline.Recorder
}

// +kubebuilder:rbac:groups=devloop.dev,resources=devenvironments,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=devloop.dev,resources=devenvironments/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=devloop.dev,resources=devenvironments/finalizers,verbs=update
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch
// Builder and test Jobs are created, deleted and their pods' logs read as
// the environment's ServiceAccount; the operator only watches the Jobs and
// lists their pods to tell how they ended. Of the other pods it watches
// only those running under the live update supervisor, to sync one as
// soon as it starts.
// The deploy engine writes (and reads) everything an environment deploys as
// the environment's ServiceAccount; the operator needs no rights on the
// deployed kinds, only the right to impersonate. Secrets and Flux sources
// the spec names are read as that ServiceAccount too (internal/identity), so
// the operator has no right to read Secrets at all.
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=impersonate
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get
// The metrics endpoint and the bundled registry's token service ask the API
// server who a caller is (TokenReview) and what it may do
// (SubjectAccessReview); neither grants the operator anything more.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// The egress policy refuses the cluster's own ranges, read at start.
// +kubebuilder:rbac:groups="",resources=nodes,verbs=list
// +kubebuilder:rbac:groups=networking.k8s.io,resources=servicecidrs,verbs=list

// SetupWithManager registers the reconciler. Status writes do not trigger a
// reconcile; spec changes and annotation changes (trigger, reconcile
// requests) do.
func (r *DevEnvironmentReconciler) SetupWithManager(mgr ctrl.Manager, concurrent int) error {
	if e := r.Engines; r.Identity == nil || e.Triggers == nil || e.Builds == nil || e.Deploy == nil || e.Tests == nil {
		// A reconciler that deployed nothing would still report Ready.
		return errors.New("DevEnvironmentReconciler needs Identity and the Triggers, Builds, Deploy and Tests engines")
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Timeline == nil {
		r.Timeline = timeline.NewRecorder()
	}
	// Builder Jobs are owned by their environment, so a finished build
	// reconciles it at once instead of at the next poll; a build in a warm
	// builder says so on the engines' wake channels, and so does a Helm
	// action that outlived its reconcile.
	b := ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.DevEnvironment{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Owns(&batchv1.Job{})
	for _, wake := range r.Engines.Wakes {
		b = b.WatchesRawSource(crsource.Channel(wake, &handler.EnqueueRequestForObject{}))
	}
	if r.Engines.LiveUpdate != nil {
		// The operator's cache holds only the pods labelled as supervised.
		b = b.Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, pod client.Object) []reconcile.Request {
			return liveupdate.PodRequests(ctx, r.Client, pod)
		}))
	}
	return b.WithOptions(controller.Options{
		MaxConcurrentReconciles: concurrent,
		NewQueue:                fairqueue.New(concurrent, r.NamespaceShare),
	}).Complete(r)
}

// Reconcile runs the steps for one environment and writes its status.
func (r *DevEnvironmentReconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	logger := log.FromContext(ctx)
	env := &v1alpha1.DevEnvironment{}
	if err := r.Get(ctx, req.NamespacedName, env); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}

	// The steps run under the deadline; status is written after it with
	// ctx, so a reconcile cut short still says why.
	stepsCtx, cancel := context.WithTimeout(ctx, r.reconcileTimeout())
	defer cancel()

	if !env.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, stepsCtx, env)
	}
	if !controllerutil.ContainsFinalizer(env, v1alpha1.Finalizer) {
		// The finalizer goes on before anything is deployed, so nothing
		// can be orphaned by a deletion that races the first rollout.
		patch := client.MergeFrom(env.DeepCopy())
		controllerutil.AddFinalizer(env, v1alpha1.Finalizer)
		if err := r.Patch(ctx, env, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding finalizer: %w", err)
		}
	}

	before, read := env.DeepCopy(), env.DeepCopy()
	tenant := r.Identity.For(env)
	s := &scope{env: env, before: before, read: read, tenant: tenant, pass: &engine.Pass{}, sources: r.beginSources(env, tenant)}
	stepsCtx = r.loadTimeline(stepsCtx, s)

	var outcome error
	defer func() {
		if !env.Spec.Suspend {
			env.Status.LastHandledReconcileAt = env.Annotations[v1alpha1.ReconcileRequestAnnotation]
		}
		s.settleProgress(ctx)
		summarize(env, outcome)
		keepTransitionTimes(read, env)
		r.recordTransition(ctx, read, env, outcome)
		r.flushTimeline(ctx, s)
		if err := r.writeStatus(ctx, env, before); err != nil {
			retErr = errors.Join(retErr, fmt.Errorf("patching status: %w", err))
			return
		}
		result, retErr = resultFor(outcome, notReadyFor(read, time.Now()))
		if next := s.next.RequeueAfter; retErr == nil && next > 0 && (result.RequeueAfter == 0 || next < result.RequeueAfter) {
			// Even a Ready or Stalled environment looks again when a
			// moving reference (a branch, a tag) is due to be resolved.
			result.RequeueAfter = next
		}
	}()

	if env.Spec.Suspend {
		logger.V(1).Info("reconciliation suspended")
		return ctrl.Result{}, nil
	}
	if env.Generation != env.Status.ObservedGeneration {
		// A new spec: say at once that it is being acted on, before any
		// step that may take a while.
		r.progress(ctx, s, fmt.Sprintf("reconciling generation %d", env.Generation))
	}
	for _, st := range r.steps() {
		if outcome != nil && !st.always {
			continue
		}
		logger.V(1).Info("running step", "step", st.name)
		// A step may write the environment itself: a progress write
		// still on its way lands first.
		s.settleProgress(ctx)
		err := st.run(stepsCtx, s)
		switch {
		case err == nil:
		case outcome == nil:
			outcome = err
			logger.V(1).Info("step ended the reconcile", "step", st.name, "outcome", err.Error())
		default:
			// The first error decides the environment's conditions; a
			// later one is retried with it.
			logger.Error(err, "step failed after the reconcile had ended", "step", st.name)
		}
	}
	if errors.Is(stepsCtx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
		// Whatever the step made of its cancelled requests (a failed
		// Helm action may look final), the cause is the deadline: retried
		// with backoff, never Stalled.
		outcome = r.cutShort(outcome)
	}
	return ctrl.Result{}, nil
}

// beginSources starts this reconcile's sources; without a resolver they
// fetch nothing.
func (r *DevEnvironmentReconciler) beginSources(env *v1alpha1.DevEnvironment, t *identity.Tenant) *source.Sources {
	if r.Sources == nil {
		return (*source.Resolver)(nil).Begin(env, t)
	}
	return r.Sources.Begin(env, t)
}

// DefaultReconcileTimeout bounds one reconcile when ReconcileTimeout is
// zero.
const DefaultReconcileTimeout = 10 * time.Minute

func (r *DevEnvironmentReconciler) reconcileTimeout() time.Duration {
	if r.ReconcileTimeout > 0 {
		return r.ReconcileTimeout
	}
	return DefaultReconcileTimeout
}

// deadlineError is the outcome of a reconcile its deadline cut short.
type deadlineError struct {
	limit time.Duration
	cause error
}

func (e *deadlineError) Error() string {
	msg := fmt.Sprintf("reconcile stopped at the operator's limit of %s (--reconcile-timeout); it goes on at the next one", e.limit)
	if e.cause != nil && !errors.Is(e.cause, context.DeadlineExceeded) {
		msg += ": " + e.cause.Error()
	}
	return msg
}

// Unwrap keeps the cause out of errors.As: a Stalled or Waiting cause of
// a cancelled request must not decide the result.
func (e *deadlineError) Unwrap() error { return nil }

func (r *DevEnvironmentReconciler) cutShort(cause error) error {
	return &deadlineError{limit: r.reconcileTimeout(), cause: cause}
}

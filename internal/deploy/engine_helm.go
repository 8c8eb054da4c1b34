package deploy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/deploy/helm"
	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/internal/identity"
	"github.com/devloop-dev/devloop/internal/source"
	"github.com/devloop-dev/devloop/internal/timeline"
)

// defaultHelmTimeout bounds each Helm action when the spec says nothing
// (the CRD defaults it to the same).
const defaultHelmTimeout = 5 * time.Minute

// reconcileHelm brings the component's release to its chart and values,
// with every built image pinned by the post-renderer, then checks the
// release's objects. A release that fails MaxReleaseFailures reconciles in
// a row with the same chart and values stalls the environment with Helm's
// error; ReconcileRelease itself rolls back failed upgrades and uninstalls
// failed installs between the attempts.
func (e *Engine) reconcileHelm(ctx context.Context, env *v1alpha1.DevEnvironment, c *v1alpha1.Component, st *v1alpha1.ComponentStatus, sources source.Resolved, t *identity.Tenant, cl client.Client, images []BuiltImage, refs map[string]ImageRef, progress Progress) (Result, error) {
	h := c.Helm
	var art *source.Artifact
	if h.Chart.Source != "" {
		var err error
		if art, err = sources.Artifact(ctx, h.Chart.Source); err != nil {
			return Result{}, err
		}
	}
	chrt, err := e.loadChart(ctx, env, c, art, cl, func(top *helm.Chart) (map[string]any, error) {
		return ComposeValues(ctx, cl, env.Namespace, h, refs, valuesFilesOf(env, c, art, top))
	})
	if err != nil {
		return Result{}, err
	}
	opts := e.applyOptions(env, c)
	req, err := e.helmRequest(ctx, env, c, st, t, cl, art, chrt, images, refs, opts, progress)
	if err != nil {
		return Result{}, err
	}
	if err := e.stalledRelease(env, st, req); err != nil {
		return Result{}, err
	}
	key, digest := appliedKey(string(env.UID), c.Name), req.Digest()
	inFlight := helm.ReleaseKey(req.Owner, req.Namespace, req.ReleaseName)
	if rec, ok := e.book().get(key); ok && rec.digest == digest && rec.release != nil && !e.helmReleases().InFlight(inFlight) {
		res, done, err := e.unchangedRelease(ctx, env, c, st, cl, key, rec, opts)
		if done || err != nil {
			return res, err
		}
	}
	e.book().forget(key)
	if upgrade, err := e.upgradeWithNewestBuilds(ctx, env, c, req, inFlight); err != nil {
		return Result{}, err
	} else if upgrade {
		images, refs = builtImages(env)
		if req, err = e.helmRequest(ctx, env, c, st, t, cl, art, chrt, images, refs, opts, progress); err != nil {
			return Result{}, err
		}
		digest = req.Digest()
	}
	started := time.Now()
	run, done := e.helmReleases().ReconcileInFlight(ctx, inFlight, client.ObjectKeyFromObject(env), req)
	// The change timeline's Deploy step (internal/timeline): an action
	// that goes on outside this reconcile is widened when a later one
	// sees it done.
	timeline.Mark(ctx, timeline.Deploy, started)
	if !done {
		// The action goes on outside this reconcile (helm/inflight.go).
		if st.Release == nil {
			st.Release = &v1alpha1.ReleaseStatus{Name: req.ReleaseName, Namespace: req.Namespace}
		}
		return Result{Phase: v1alpha1.PhaseDeploying, Message: run.InFlightMessage(req.Namespace, req.ReleaseName) + e.timeoutNote(c, req)}, nil
	}
	out, err := run.Result()
	log.FromContext(ctx).V(1).Info("helm release checked", "component", c.Name, "actions", out.Actions,
		"took", time.Since(started).Round(time.Millisecond).String())
	st.Release = releaseStatus(st.Release, req, out)
	var locked *helm.ReleaseLockedError
	if errors.As(err, &locked) {
		// Not a failure: someone's action may be running. Looked at
		// again like any rollout in flight.
		return Result{Phase: v1alpha1.PhaseDeploying, Message: locked.Error()}, nil
	}
	if err != nil {
		var taken *helm.TakenObjectError
		if errors.As(err, &taken) {
			return Result{}, fault.Stalled(v1alpha1.ReasonDeployFailed, fmt.Errorf("%w; leave it out of this release with %s.helm.patches: [{target: {kind: %s, name: %s}, patch: \"$patch: delete\"}], or delete it",
				err, componentField(env, c), taken.Kind, taken.Name))
		}
		if fault.IsPermanent(err) || fault.IsUnavailable(err) {
			return Result{}, err
		}
		if out.Failure == helm.FailureHook {
			// Read now: the next attempt replaces the failed Job.
			err = fmt.Errorf("%w%s", err, e.hookFailureOutput(ctx, cl, t, req.Namespace, opts))
		}
		n := countFailure(st.Release, out.Digest)
		if n >= e.maxReleaseFailures() {
			return Result{}, fault.Stalled(v1alpha1.ReasonDeployFailed,
				fmt.Errorf("helm release %s/%s failed %d times in a row: %w", req.Namespace, req.ReleaseName, n, err))
		}
		return Result{}, fmt.Errorf("helm release %s/%s (attempt %d of %d): %w", req.Namespace, req.ReleaseName, n, e.maxReleaseFailures(), err)
	}
	st.Release.Failures, st.Release.FailedDigest = 0, ""
	if out.Changed() {
		log.FromContext(ctx).Info("helm release reconciled", "component", c.Name, "release", req.ReleaseName,
			"namespace", req.Namespace, "actions", out.Actions, "revision", out.Release.Revision)
	}

	rls := out.Last
	if rls == nil || run.Started().Before(started) {
		// Not read by this reconcile's own call: read it now.
		if rls, err = helm.LastRevision(req.Configs, req.Namespace, req.ReleaseName); err != nil {
			return Result{}, err
		}
	}
	objs, err := helm.ReleaseManifest(rls, e.Mapper)
	if err != nil {
		return Result{}, fmt.Errorf("release %s/%s manifest: %w", req.Namespace, req.ReleaseName, err)
	}
	st.Drift = nil
	if !out.Changed() && !recentlyDeployed(rls, e.DriftQuietPeriod) {
		drift, err := correctReleaseDrift(ctx, cl, objs, opts, rls.ReleaseInfo)
		if err != nil {
			return Result{}, err
		}
		st.Drift = boundDrift(drift)
	}
	if len(st.Drift) == 0 {
		e.rememberRelease(ctx, cl, key, digest, rls, objs)
	}
	st.Release.Workloads, st.Release.MoreWorkloads = workloads(objs)
	deployed := make([]ObjRef, 0, len(objs))
	for _, o := range objs {
		deployed = append(deployed, RefOf(o))
	}
	return readiness(ctx, env, c, cl, deployed, fmt.Sprintf("release %s revision %d %s", req.ReleaseName, out.Release.Revision, out.Release.Status))
}

// helmRequest is the release request of c's chart with images pinned as
// images and refs say: values composed, rendering (post-renderer,
// patches, render key), hook checks and progress.
func (e *Engine) helmRequest(ctx context.Context, env *v1alpha1.DevEnvironment, c *v1alpha1.Component, st *v1alpha1.ComponentStatus, t *identity.Tenant,
	cl client.Client, art *source.Artifact, chrt *helm.Chart, images []BuiltImage, refs map[string]ImageRef, opts ApplyOptions, progress Progress) (helm.ReleaseRequest, error) {
	h := c.Helm
	// valuesFrom is read as the environment's ServiceAccount: the
	// operator's own right to read Secrets is not lent to the tenant.
	vals, err := ComposeValues(ctx, cl, env.Namespace, h, refs, valuesFilesOf(env, c, art, chrt))
	if err != nil {
		return helm.ReleaseRequest{}, err
	}
	req, err := e.releaseRequest(env, c, t)
	if err != nil {
		return helm.ReleaseRequest{}, err
	}
	req.Chart, req.Values = chrt, vals
	req.Owner = string(env.UID)
	if err := helmRendering(&req, env, c, images, opts); err != nil {
		return helm.ReleaseRequest{}, err
	}
	req.CheckHooks = hookOwnerCheck(cl, e.Mapper, req.Namespace, opts)
	if progress != nil {
		req.BeforeAction = func(act helm.Action) {
			if st.Release == nil {
				// Recorded (by the progress write) before anything is
				// installed, so a deletion finds it whatever happens next.
				st.Release = &v1alpha1.ReleaseStatus{Name: req.ReleaseName, Namespace: req.Namespace}
			}
			st.Phase = v1alpha1.PhaseDeploying
			st.Message = fmt.Sprintf("helm %s of release %s/%s in progress", act, req.Namespace, req.ReleaseName) + e.timeoutNote(c, req)
			progress("component " + c.Name + ": " + st.Message)
		}
	}
	return req, nil
}

// recentlyDeployed says the release's last action was less than quiet ago.
func recentlyDeployed(rls *helm.Revision, quiet time.Duration) bool {
	return rls != nil && recentlyDeployedAt(rls.LastDeployed, quiet)
}

func recentlyDeployedAt(deployed time.Time, quiet time.Duration) bool {
	return time.Since(deployed) < quiet
}

// correctReleaseDrift finds hand edits to the objects of a release that
// is in sync with its chart and values, and puts them back by applying the
// release's manifest server-side (as Flux's helm-controller corrects
// drift): an upgrade would not, since Helm sees nothing to change. Only a
// release with drift is applied, so devloop takes no field ownership from
// Helm otherwise. Hooks and crds/ are not in the manifest and not checked.
func correctReleaseDrift(ctx context.Context, cl client.Client, objs []*unstructured.Unstructured, opts ApplyOptions, rls helm.ReleaseInfo) ([]string, error) {
	drift, err := Drift(ctx, cl, objs, opts)
	if err != nil {
		return nil, afterDeploy(rls, "checking drift", err)
	}
	if len(drift) == 0 {
		return nil, nil
	}
	if _, err := Apply(ctx, cl, objs, opts); err != nil {
		return nil, afterDeploy(rls, "correcting drift", err)
	}
	return drift, nil
}

// afterDeploy words a failure of what follows a deployed release (its
// drift check): the release itself deployed, which the message says
// first, or a reader of "patch … invalid" alone takes the release for
// failed. The cause keeps its class (a Permanent one still stalls).
func afterDeploy(rls helm.ReleaseInfo, doing string, err error) error {
	return fmt.Errorf("release %s deployed (revision %d); %s failed: %w", rls.Name, rls.Revision, doing, err)
}

// releaseStatus is the release's entry in status after a reconcile: what
// Helm stored, or, when nothing is stored (an install that failed and was
// uninstalled), the release's name and namespace, so the failure count has
// a place to live.
func releaseStatus(prev *v1alpha1.ReleaseStatus, req helm.ReleaseRequest, out helm.Outcome) *v1alpha1.ReleaseStatus {
	st := &v1alpha1.ReleaseStatus{Name: req.ReleaseName, Namespace: req.Namespace}
	if out.Release.Name != "" {
		st.Name, st.Namespace = out.Release.Name, out.Release.Namespace
		st.Revision, st.Status = out.Release.Revision, out.Release.Status
	}
	if prev != nil && prev.Name == st.Name && prev.Namespace == st.Namespace {
		st.Failures, st.FailedDigest = prev.Failures, prev.FailedDigest
	}
	return st
}

// notRetried ends the message of a release that stalled and is left.
const notRetried = "; not retried until the chart, values or images change, or a reconcile is requested (kubectl devloop push, or the devloop.dev/reconcile-requested-at annotation)"

// stalledRelease is the Stalled error of a release that failed
// MaxReleaseFailures times in a row with the chart, values and images req
// would install again: trying again would fail the same way. A new
// reconcile request allows one more attempt.
func (e *Engine) stalledRelease(env *v1alpha1.DevEnvironment, st *v1alpha1.ComponentStatus, req helm.ReleaseRequest) error {
	rel := st.Release
	if rel == nil || rel.Failures < e.maxReleaseFailures() || rel.FailedDigest != req.Digest() {
		return nil
	}
	if r := env.Annotations[v1alpha1.ReconcileRequestAnnotation]; r != "" && r != env.Status.LastHandledReconcileAt {
		rel.Failures = e.maxReleaseFailures() - 1
		return nil
	}
	msg := st.Message
	if msg == "" {
		msg = fmt.Sprintf("helm release %s/%s failed %d times in a row", req.Namespace, req.ReleaseName, rel.Failures)
	}
	if !strings.HasSuffix(msg, notRetried) {
		msg += notRetried
	}
	return fault.Stalled(v1alpha1.ReasonDeployFailed, errors.New(msg))
}

// countFailure records a failed reconcile of the chart and values digest
// and returns how many failed in a row.
func countFailure(st *v1alpha1.ReleaseStatus, digest string) int {
	if st.FailedDigest != digest {
		st.Failures, st.FailedDigest = 0, digest
	}
	st.Failures++
	return st.Failures
}

// releasePlace is the name and namespace of the component's release as
// the spec says.
func releasePlace(env *v1alpha1.DevEnvironment, c *v1alpha1.Component) (name, namespace string) {
	name, namespace = c.Name, env.Namespace
	if c.Helm != nil && c.Helm.ReleaseName != "" {
		name = c.Helm.ReleaseName
	}
	if c.Helm != nil && c.Helm.Namespace != "" {
		namespace = c.Helm.Namespace
	}
	return name, namespace
}

// releaseRequest is the identity and placement of a component's release.
func (e *Engine) releaseRequest(env *v1alpha1.DevEnvironment, c *v1alpha1.Component, t *identity.Tenant) (helm.ReleaseRequest, error) {
	user, err := t.User()
	if err != nil {
		return helm.ReleaseRequest{}, err
	}
	h := c.Helm
	req := helm.ReleaseRequest{
		Configs:         e.helmReleases().ConfigFactory(t.BaseConfig(), user),
		CreateNamespace: h.CreateNamespace,
		Timeout:         e.helmTimeout(h),
		Writer:          e.HelmWriter,
	}
	req.ReleaseName, req.Namespace = releasePlace(env, c)
	return req, nil
}

// helmTimeout is the timeout of each Helm action of h: the spec's, or
// defaultHelmTimeout, capped at the operator's maximum.
func (e *Engine) helmTimeout(h *v1alpha1.HelmSpec) time.Duration {
	timeout := defaultHelmTimeout
	if h.Timeout != nil && h.Timeout.Duration > 0 {
		timeout = h.Timeout.Duration
	}
	return min(timeout, e.maxHelmTimeout())
}

// timeoutNote says, for status, that the spec's Helm timeout was capped.
func (e *Engine) timeoutNote(c *v1alpha1.Component, req helm.ReleaseRequest) string {
	if c.Helm.Timeout == nil || c.Helm.Timeout.Duration <= req.Timeout {
		return ""
	}
	return fmt.Sprintf(" (timeout %s, the operator's maximum, not the %s the spec asks)", req.Timeout, c.Helm.Timeout.Duration)
}

// uninstallRelease removes a release of component c as the tenant, if
// the environment installed it, with the hook objects it left (Helm's
// uninstall keeps them) that the environment owns. A release that is not
// there (never installed, or its namespace deleted by hand with its
// storage) is done; one someone else installed is left.
func (e *Engine) uninstallRelease(ctx context.Context, env *v1alpha1.DevEnvironment, c *v1alpha1.Component, t *identity.Tenant, name, namespace, why string) error {
	owner := string(env.UID)
	if err := e.helmReleases().StopInFlight(helm.ReleaseKey(owner, namespace, name)); err != nil {
		return fmt.Errorf("uninstalling release %s/%s: %w", namespace, name, err)
	}
	user, err := t.User()
	if err != nil {
		return err
	}
	cl, err := t.Client()
	if err != nil {
		return err
	}
	return e.helmReleases().UninstallOwned(ctx, e.helmReleases().ConfigFactory(t.BaseConfig(), user), owner,
		helm.ActionOptions{ReleaseName: name, Namespace: namespace, Timeout: defaultHelmTimeout, Description: why},
		hookOwnerCheck(cl, e.Mapper, namespace, ownerOptions(env, c)), hookRemover(cl, e.Mapper, namespace, ownerOptions(env, c)))
}

// Wake reports environments whose Helm action ended outside a reconcile,
// so the controller reconciles them at once.
func (e *Engine) Wake() <-chan event.GenericEvent { return e.helmReleases().Wakes() }

// plainHTTPChart allows plain HTTP to an OCI chart only in the
// environment's own registry, and only when spec.registry.insecure says so.
func plainHTTPChart(env *v1alpha1.DevEnvironment, oci string) bool {
	r := env.Spec.Registry
	if oci == "" || r == nil || !r.Insecure {
		return false
	}
	host, _, _ := strings.Cut(r.Prefix, "/")
	return strings.HasPrefix(strings.TrimPrefix(oci, "oci://"), host+"/")
}

// workloads are the objects among objs that run pods, for clients that
// look for a release's pods without reading Helm's storage: at most the
// environment's total (the status's Bound cuts the total across releases),
// and how many more there are.
func workloads(objs []*unstructured.Unstructured) (refs []v1alpha1.ObjectRef, more int32) {
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		switch {
		case gvk.Group == "apps" && (gvk.Kind == "Deployment" || gvk.Kind == "StatefulSet" || gvk.Kind == "DaemonSet" || gvk.Kind == "ReplicaSet"),
			gvk.Group == "batch" && gvk.Kind == "Job",
			gvk.Group == "" && gvk.Kind == "Pod":
		default:
			continue
		}
		if len(refs) == v1alpha1.MaxWorkloads {
			more++
			continue
		}
		refs = append(refs, v1alpha1.ObjectRef{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Namespace: o.GetNamespace(), Name: o.GetName()})
	}
	return refs, more
}

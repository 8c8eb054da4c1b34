package deploy

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/deploy/helm"
)

// A release whose chart, values and images are those this process last
// deployed needs no Helm at all: no action configuration (discovery), no
// history listed. What could have changed behind devloop's back is looked
// at cheaply: the storage Secret of the deployed revision (Helm rewrites
// it on every action on the release — an upgrade, a rollback, an
// uninstall — or deletes it) and that no newer revision exists (someone's
// upgrade, pending), listed as metadata only (helm.StoredRevision); then
// the release's objects, as a manifests component's (applied.go).

// rememberRelease records a release found deployed with digest and its
// objects, after a full reconcile of it. Its storage Secret is read now;
// one that is not labelled deployed (someone acted in between) is not
// recorded, and the next reconcile looks at the release in full again.
func (e *Engine) rememberRelease(ctx context.Context, cl client.Reader, key, digest string, rls *helm.Revision, objs []*unstructured.Unstructured) {
	if !rls.DeployedWith(digest) {
		e.book().forget(key)
		return
	}
	secret := helm.ReleaseSecret(rls.Name, rls.Revision)
	version, err := helm.StoredRevision(ctx, cl, rls.Namespace, rls.Name, rls.Revision)
	if err != nil || version == "" {
		e.book().forget(key)
		return
	}
	e.book().set(key, appliedRecord{digest: digest, release: &releaseRecord{
		info: rls.ReleaseInfo, secret: secret, secretVersion: version, objects: objs,
		deployed: rls.LastDeployed,
	}})
}

// unchangedRelease is the no-op of a release recorded with the digest
// about to be deployed: when its deployed revision is untouched and its
// objects are unchanged (or the dry run finds them as wanted), the result
// is their readiness (done). Otherwise the caller reconciles it in full.
func (e *Engine) unchangedRelease(ctx context.Context, env *v1alpha1.DevEnvironment, c *v1alpha1.Component, st *v1alpha1.ComponentStatus, cl client.Client, key string, rec appliedRecord, opts ApplyOptions) (Result, bool, error) {
	rel := rec.release
	if st.Release == nil || st.Release.Revision != rel.info.Revision || st.Release.Name != rel.info.Name {
		return Result{}, false, nil
	}
	version, err := helm.StoredRevision(ctx, cl, rel.info.Namespace, rel.info.Name, rel.info.Revision)
	if err != nil || version != rel.secretVersion {
		// Gone, superseded or rewritten: Helm decides what to do.
		return Result{}, false, nil
	}
	refs := make([]ObjRef, 0, len(rel.objects))
	for _, o := range rel.objects {
		refs = append(refs, RefOf(o))
	}
	r, read, err := checkVersions(ctx, snapshotted(ctx, cl, opts.Environment), refs, c.Health)
	if err != nil {
		return Result{}, false, err
	}
	if !unchangedSince(rec.inSync, read, refs) && !recentlyDeployedAt(rel.deployed, e.DriftQuietPeriod) {
		drift, inSync, err := driftVersions(ctx, cl, rel.objects, opts)
		if err != nil {
			return Result{}, false, afterDeploy(rel.info, "checking drift", err)
		}
		if len(drift) > 0 {
			return Result{}, false, nil
		}
		rec.inSync = inSync
		e.book().set(key, rec)
	}
	st.Drift = nil
	st.Release.Workloads, st.Release.MoreWorkloads = workloads(rel.objects)
	return readinessResult(env, c, r, fmt.Sprintf("release %s revision %d %s", rel.info.Name, rel.info.Revision, rel.info.Status)), true, nil
}

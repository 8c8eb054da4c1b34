package deploy

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/deploy/helm"
	"github.com/devloop-dev/devloop/internal/message"
)

// A chart's live-updatable images (its component's own, and those its
// helm.imageValues write by reference or digest) are pinned at the digest
// their templates run (ImageStatus.DeployDigest) while a live update
// serves a newer build in place: the release's values and render do not
// change, so a binary-only change calls no Helm action at all, and the
// release keeps saying truthfully what its templates run
// (status.images[].templateDigest; liveDigest is what the pods were
// synced to).
//
// A release that is upgraded anyway (its chart or values changed,
// another image rolled out) is not upgraded to the older digests: its
// hooks and Jobs run what the release pins, and they are not synced. The
// upgrade pins the newest build of its live images instead and records
// them as rolled out, so the templates, the hooks and status agree.

// liveChartImages are the images of c's release serving a live update in
// place: c's own live-updatable images, and the ones its imageValues name.
func liveChartImages(env *v1alpha1.DevEnvironment, c *v1alpha1.Component) []*v1alpha1.ImageStatus {
	var out []*v1alpha1.ImageStatus
	for i := range env.Spec.Components {
		owner := &env.Spec.Components[i]
		for j := range owner.Images {
			img := &owner.Images[j]
			if img.LiveUpdate == nil || (owner.Name != c.Name && !writesImage(c.Helm, img.Name)) {
				continue
			}
			if ist := env.Status.Component(owner.Name).Image(img.Name); ist != nil && ist.ServesLive() {
				out = append(out, ist)
			}
		}
	}
	return out
}

// writesImage reports whether the chart's imageValues name image.
func writesImage(h *v1alpha1.HelmSpec, image string) bool {
	for _, v := range h.ImageValues {
		if v.Image == image {
			return true
		}
	}
	return false
}

// upgradeWithNewestBuilds decides, for a release about to be reconciled
// by Helm (the no-op path did not answer), whether an upgrade or install
// is due while some of its images serve live: then those images are
// recorded as rolled out (templates to run Digest) and it returns true,
// for the caller to build the request again with their newest digests.
// Idempotent: once recorded, the images no longer serve live.
//
// An action is due when the release's last revision was not deployed
// with req, or, while an action started by an earlier reconcile is in
// flight (or ended, its outcome not taken yet), when that action is not
// req's: the action ends with other pins than req's, so req runs after
// it. That earlier action pinned the newest builds when it started; a
// reconcile that finds the images serving live again anyway (it read the
// environment before that reconcile's status reached the cache, or that
// status write failed: issue 33's chart case on a loaded cluster) builds
// the same request again here and takes the action's outcome, rather
// than upgrading the release back to the older digests once it ends.
// The release's last revision is read only when an image serves live and
// no action is pending.
func (e *Engine) upgradeWithNewestBuilds(ctx context.Context, env *v1alpha1.DevEnvironment, c *v1alpha1.Component, req helm.ReleaseRequest, inFlight string) (bool, error) {
	live := liveChartImages(env, c)
	if len(live) == 0 {
		return false, nil
	}
	reason := fmt.Sprintf("release %s/%s is upgraded (chart, values or another image changed): its live images roll out with it, hooks included", req.Namespace, req.ReleaseName)
	if pending, ok := e.helmReleases().PendingDigest(inFlight); ok {
		if pending == req.Digest() {
			return false, nil
		}
		log.FromContext(ctx).V(1).Info("a helm action in flight is not this request's while images serve live: their newest builds are pinned",
			"release", req.Namespace+"/"+req.ReleaseName, "images", len(live))
	} else {
		rls, err := helm.LastRevision(req.Configs, req.Namespace, req.ReleaseName)
		if err != nil {
			return false, err
		}
		if rls.DeployedWith(req.Digest()) {
			return false, nil
		}
		if rls == nil {
			reason = fmt.Sprintf("release %s/%s is installed anew: its images roll out", req.Namespace, req.ReleaseName)
		}
	}
	for _, ist := range live {
		ist.LiveDigest, ist.TemplateDigest = "", ist.Digest
		ist.LastUpdate = v1alpha1.UpdateRollout
		ist.UpdateReason = message.Truncate(reason, v1alpha1.MaxUpdateReason)
	}
	return true, nil
}

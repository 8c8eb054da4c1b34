package liveupdate

import (
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/engine"
	"github.com/devloop-dev/devloop/internal/timeline"
)

// syncWhilePushed: when this reconcile's build of img is still being
// pushed (build.Engine.PushBehind), the pods are synced from the image as
// assembled meanwhile, then the push is joined, and only then does the
// image's status name the new digest; updateImage goes on from there as
// for any new digest (it plans again and finds the pods synced already).
// The pods may run the new files a moment before the registry holds
// them, never for long: a push that fails fails the reconcile, status
// keeps the old digest, and the next reconcile pushes the same digest
// again. Nothing here writes status: a sync that cannot be done early
// (a rollout, a failed pod) is left to updateImage, which decides it
// again with the pushed digest.
//
// It returns the decision it synced by, for the digest it names: once
// pushed, status records that live update without planning it again (a
// second read of the changed layer, from the registry, on the way to
// Ready).
func (e *Engine) syncWhilePushed(ctx context.Context, req engine.Request, img *v1alpha1.ImageSpec, ist *v1alpha1.ImageStatus, out *Outcome) (*earlyPlan, error) {
	if e.Images == nil {
		return nil, nil
	}
	digest, assembled, wait := e.Images.Publishing(req, img.Name)
	if wait == nil {
		return nil, nil
	}
	var decided *earlyPlan
	pending := *ist // what status will say once the push is done
	pending.Digest = digest
	// An image of several platforms is synced once pushed (its pods take
	// each its node's platform's files, read from the registry).
	early := assembled != nil && len(platformsOf(img)) == 1
	if early && pending.TemplateDigest != "" && pending.TemplateDigest != digest && pending.LiveDigest != digest && e.mustRollOut(req, img) == "" {
		started := time.Now()
		listed := e.listTargets(ctx, req, &pending) // beside the comparison
		d, tarball, err := e.planFrom(ctx, req, img, &pending, "", assembled)
		if err == nil && d.Live {
			e.remember(req.Env.UID, img.Name, pending.TemplateDigest, digest, map[string][]byte{"": tarball})
			decided = &earlyPlan{template: pending.TemplateDigest, digest: digest, decision: d}
			pending.LiveDigest = digest
			synced, err := e.convergeListed(ctx, req, img, &pending, listed)
			if len(synced) > 0 {
				// On the change timeline as any live update: the push
				// breakdown then shows the sync ending before the push.
				timeline.Mark(timeline.InComponent(ctx, img.Name), timeline.LiveUpdate, started)
			}
			out.Synced = append(out.Synced, synced...)
			log.FromContext(ctx).V(1).Info("synced while the image is pushed", "image", img.Name, "digest", digest,
				"pods", len(synced), "took", time.Since(started).String(), "failed", err != nil)
		}
	}
	waited := time.Now()
	if err := wait(ctx); err != nil {
		return nil, err
	}
	log.FromContext(ctx).V(1).Info("image pushed", "image", img.Name, "digest", digest, "waited", time.Since(waited).String())
	if ist.Digest != digest {
		// The build recorded it elsewhere (never expected): let the
		// next reconcile look again rather than guess.
		log.FromContext(ctx).Info("a pushed build is not in status", "image", img.Name, "digest", digest, "status", ist.Digest)
	}
	return decided, nil
}

// earlyPlan is the live update syncWhilePushed decided from template to
// digest (its tar remembered for converge).
type earlyPlan struct {
	template, digest string
	decision         *Decision
}

// of is the early decision when it is the one from ist's template digest
// to its digest, nil otherwise.
func (p *earlyPlan) of(ist *v1alpha1.ImageStatus) *Decision {
	if p == nil || p.template != ist.TemplateDigest || p.digest != ist.Digest {
		return nil
	}
	return p.decision
}

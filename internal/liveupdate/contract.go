package liveupdate

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/engine"
	"github.com/devloop-dev/devloop/internal/message"
)

// Reconcile runs between a component's build and its deploy (the engine
// contract): images whose newest digest changed only under
// liveUpdate.paths are synced into the running pods (their DeployDigest
// stays the templates'), the others are left for the deploy step to roll
// out, status saying why. The phase is left to the deploy step.
func (e *Engine) Reconcile(ctx context.Context, req engine.Request) (engine.Result, error) {
	if req.Component == nil || !hasLiveUpdate(req.Component) {
		return engine.Result{}, nil
	}
	out, err := e.update(ctx, req)
	if len(out.Synced) > 0 && e.Events != nil {
		e.Events.Eventf(req.Env, nil, corev1.EventTypeNormal, v1alpha1.ReasonLiveUpdated, "LiveUpdate", "%s",
			message.Truncate("component "+req.Component.Name+": synced in place into "+strings.Join(out.Synced, ", "), message.MaxEventNote))
	}
	return engine.Result{}, err
}

// Finalize has nothing to remove: synced pods belong to what the deploy
// engine deployed. An environment being deleted is forgotten.
func (e *Engine) Finalize(_ context.Context, req engine.Request) error {
	if req.Component == nil && req.Env != nil {
		e.forget(req.Env.UID)
	}
	return nil
}

// Deployed notes, once the deploy step applied the component, the digest
// its pod templates now run: a live update compares new builds with it.
// It and update are the only writers of TemplateDigest and LiveDigest.
// An image whose liveUpdate was taken off keeps no live update fields:
// its templates run Digest, and a reason left from its live days would
// describe a build it no longer has.
func Deployed(c *v1alpha1.Component, st *v1alpha1.ComponentStatus) {
	for i := range c.Images {
		ist := st.Image(c.Images[i].Name)
		switch {
		case ist == nil:
		case c.Images[i].LiveUpdate == nil:
			ist.TemplateDigest, ist.LiveDigest, ist.LastUpdate, ist.UpdateReason = "", "", "", ""
		default:
			ist.TemplateDigest = ist.DeployDigest()
			if ist.TemplateDigest == ist.Digest {
				ist.LiveDigest = ""
			}
		}
	}
}

func hasLiveUpdate(c *v1alpha1.Component) bool {
	for i := range c.Images {
		if c.Images[i].LiveUpdate != nil {
			return true
		}
	}
	return false
}

// Summary names the images serving a live update in place, for the Ready
// message: "; live update serving: web/server".
func Summary(env *v1alpha1.DevEnvironment) string {
	var names []string
	for _, c := range env.Status.Components {
		for _, img := range c.Images {
			if img.ServesLive() {
				names = append(names, c.Name+"/"+img.Name)
			}
		}
	}
	if len(names) == 0 {
		return ""
	}
	return "; live update serving: " + strings.Join(names, ", ")
}

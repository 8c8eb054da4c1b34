package controllers

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/liveupdate"
	"github.com/devloop-dev/devloop/internal/message"
)

// defaultConvergeInterval is how often an environment whose pods serve a
// live update in place is looked at for pods started since (rescheduled,
// scaled up, restarted), which must be synced to the latest digest.
// Nothing watches pods, so this bounds how long such a pod serves the
// image's own files after its supervisor's start gate gave up waiting
// (3 s); while pods of the template are starting, each reconcile also
// tells their supervisors to start at once. A reconcile of a Ready
// environment is a few reads, so 2 s costs little, and only environments
// with pods of live-updatable images pay it.
const defaultConvergeInterval = 2 * time.Second

func (r *DevEnvironmentReconciler) convergeInterval() time.Duration {
	if r.ConvergeInterval > 0 {
		return r.ConvergeInterval
	}
	return defaultConvergeInterval
}

// liveUpdate runs between a component's build and its deploy: images
// whose newest digest changed only under liveUpdate.paths are synced
// into the running pods (their DeployDigest stays the templates'), the
// others are left for the deploy step to roll out, status saying why.
func (r *DevEnvironmentReconciler) liveUpdate(ctx context.Context, s *scope, c *v1alpha1.Component, st *v1alpha1.ComponentStatus) error {
	if r.LiveUpdate == nil || !hasLiveUpdate(c) {
		return nil
	}
	out, err := r.LiveUpdate.Update(ctx, liveupdate.Request{Env: s.env, Component: c, Status: st, Tenant: s.tenant, Registry: s.imageBuilds(r)})
	if out.Pending || out.Serving {
		s.requeueWithin(r.convergeInterval())
	}
	if len(out.Synced) > 0 && r.Recorder != nil {
		r.Recorder.Eventf(s.env, nil, corev1.EventTypeNormal, v1alpha1.ReasonLiveUpdated, "LiveUpdate", "%s",
			message.Truncate("component "+c.Name+": synced in place into "+strings.Join(out.Synced, ", "), message.MaxEventNote))
	}
	return err
}

// recordTemplates notes, once the deploy step applied the component, the
// digest its pod templates now run: a live update compares new builds
// with it.
func recordTemplates(c *v1alpha1.Component, st *v1alpha1.ComponentStatus) {
	for i := range c.Images {
		if ist := st.Image(c.Images[i].Name); ist != nil && c.Images[i].LiveUpdate != nil {
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

// liveSummary names the images serving a live update in place, for the
// Ready message: "; live update serving: web/server".
func liveSummary(env *v1alpha1.DevEnvironment) string {
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

package helm

import (
	"bytes"
	"context"
	"fmt"

	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Patcher is what a release's render-time patches do (deploy's compiled
// helm.patches): Len patches, Apply edits objs and marks in matched (Len
// long) each patch that selected one of them, and Unmatched is the error
// for the patches matched does not mark. The patches themselves belong to
// the deploy engine, which applies them to manifests too.
type Patcher interface {
	Len() int
	Apply(objs []*unstructured.Unstructured, matched []bool) ([]*unstructured.Unstructured, error)
	Unmatched(matched []bool) error
}

// noPatches is the Patcher of a request without patches.
type noPatches struct{}

func (noPatches) Len() int { return 0 }
func (noPatches) Apply(objs []*unstructured.Unstructured, _ []bool) ([]*unstructured.Unstructured, error) {
	return objs, nil
}
func (noPatches) Unmatched([]bool) error { return nil }

// releaseRender edits what a Helm install or upgrade renders before any
// of it reaches the cluster: patches first, then Mutate (labels, pinned
// images), so a patch that names a built image gets it pinned and none
// can take devloop's ownership labels away.
//
// Helm 3 runs a post-renderer over the release manifest only, not over
// its hooks, so a pre-install Job running a built image would run the
// chart's tag and no patch would reach it. The hooks are edited where
// Helm hands them over before running them: when the action stores the
// new pending revision (hookRenderDriver), which both install and upgrade
// do after rendering and before the first hook. That is also the first
// point where the whole render — manifest and hooks — is known, so a
// patch that matched neither fails there, before anything was created.
// The stored revision holds the edited hooks, so a rollback or uninstall
// runs its hooks as they were installed, and `helm get hooks` shows what
// ran. The manifest is edited once (post-render), each hook once (the
// pending write), so no JSON6902 add is applied twice.
type releaseRender struct {
	patches Patcher
	mutate  Mutator
	check   HookFunc
	// matched marks the patches that matched the manifest of the action
	// in progress; the pending write of its revision consumes it.
	matched []bool
}

// newReleaseRender is nil when req edits nothing.
func newReleaseRender(req ReleaseRequest) *releaseRender {
	patches := req.Patches
	if patches == nil {
		patches = noPatches{}
	}
	if req.Mutate == nil && patches.Len() == 0 && req.CheckHooks == nil {
		return nil
	}
	return &releaseRender{patches: patches, mutate: req.Mutate, check: req.CheckHooks}
}

// Run implements postrender.PostRenderer, for the release manifest.
func (r *releaseRender) Run(rendered *bytes.Buffer) (*bytes.Buffer, error) {
	r.matched = make([]bool, r.patches.Len())
	return EditPostRenderer{Edit: func(objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
		return r.edit(objs, r.matched)
	}}.Run(rendered)
}

// edit patches objs (a patch may leave some out), then mutates those
// kept, and returns them.
func (r *releaseRender) edit(objs []*unstructured.Unstructured, matched []bool) ([]*unstructured.Unstructured, error) {
	objs, err := r.patches.Apply(objs, matched)
	if err != nil {
		return nil, err
	}
	if r.mutate != nil {
		return objs, r.mutate(objs)
	}
	return objs, nil
}

// renderHooks edits the hooks of a revision about to be stored pending,
// then fails if a patch matched neither them nor the manifest, or if the
// hook check refuses one of them.
func (r *releaseRender) renderHooks(ctx context.Context, rls *release.Release) error {
	matched := r.matched
	r.matched = nil
	if len(matched) != r.patches.Len() {
		matched = make([]bool, r.patches.Len())
	}
	var all []*unstructured.Unstructured
	hooks := rls.Hooks[:0:0]
	for _, h := range rls.Hooks {
		objs, err := parseManifests([]byte(h.Manifest))
		if err != nil {
			return fmt.Errorf("hook %s: %w", h.Path, err)
		}
		if objs, err = r.edit(objs, matched); err != nil {
			return fmt.Errorf("hook %s: %w", h.Path, err)
		}
		if len(objs) == 0 {
			// Left out by a patch ($patch: delete): no hook to run.
			continue
		}
		hooks = append(hooks, h)
		out, err := writeManifests(objs)
		if err != nil {
			return fmt.Errorf("hook %s: %w", h.Path, err)
		}
		h.Manifest = out.String()
		if runByActions(h) {
			all = append(all, objs...)
		}
	}
	rls.Hooks = hooks
	if err := r.patches.Unmatched(matched); err != nil {
		return err
	}
	return r.checkHooks(ctx, all)
}

// checkStoredHooks runs the hook check over the hooks of a revision
// stored before (a rollback's copy), as they were rendered then.
func (r *releaseRender) checkStoredHooks(ctx context.Context, rls *release.Release) error {
	var all []*unstructured.Unstructured
	for _, h := range rls.Hooks {
		if !runByActions(h) {
			continue
		}
		objs, err := parseManifests([]byte(h.Manifest))
		if err != nil {
			return fmt.Errorf("hook %s: %w", h.Path, err)
		}
		all = append(all, objs...)
	}
	return r.checkHooks(ctx, all)
}

// runByActions says an install, upgrade, rollback or uninstall may run the
// hook: not one that only `helm test` runs, which devloop never does.
func runByActions(h *release.Hook) bool {
	for _, e := range h.Events {
		if e != release.HookTest {
			return true
		}
	}
	return false
}

func (r *releaseRender) checkHooks(ctx context.Context, objs []*unstructured.Unstructured) error {
	if r.check == nil || len(objs) == 0 {
		return nil
	}
	return r.check(ctx, objs)
}

// HookFunc is told the objects of a release's hooks: to decide whether
// they may run (ReleaseRequest.CheckHooks), or to remove what they left
// (UninstallOwned).
type HookFunc func(ctx context.Context, hooks []*unstructured.Unstructured) error

// hookRenderDriver is a storage driver decorator that edits the hooks of
// each revision an install or upgrade stores as pending, and checks them
// (see releaseRender). A rollback's pending revision is a copy of one
// stored before, already edited: its hooks are checked again (what they
// are named like may have appeared since), not edited. Helm stores the
// pending revision before it runs the first hook, and a refusal here
// ends the action with nothing stored and no hook run.
type hookRenderDriver struct {
	driver.Driver
	render *releaseRender
	// ctx is the ReconcileRelease call's: Helm's storage interface has
	// none, and the check reads the cluster.
	ctx context.Context
}

// Create implements driver.Driver.
func (d hookRenderDriver) Create(key string, rls *release.Release) error {
	if rls != nil && rls.Info != nil {
		switch rls.Info.Status {
		case release.StatusPendingInstall, release.StatusPendingUpgrade:
			if err := d.render.renderHooks(d.ctx, rls); err != nil {
				return err
			}
		case release.StatusPendingRollback:
			if err := d.render.checkStoredHooks(d.ctx, rls); err != nil {
				return err
			}
		}
	}
	return d.Driver.Create(key, rls)
}

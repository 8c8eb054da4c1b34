package helm

import (
	"context"
	"fmt"
	"slices"

	"helm.sh/helm/v3/pkg/release"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// UninstallOwned removes the release o names, if owner (an environment's
// UID) installed it. A release that is not there (never installed, or
// its namespace deleted by hand with its storage) is done; one someone
// else installed is left. Stop the release's action in flight first
// (Releases.StopInFlight).
//
// Helm's uninstall deletes the release's manifest, not its hooks: a hook
// Job kept by its delete policy (before-hook-creation, Helm's default),
// or left running by an action that was stopped, stays in the namespace.
// removeHooks, when set, is given the hook objects of every stored
// revision to remove what of them the caller owns: before the uninstall,
// so a failure leaves the release (and its record of the hooks) for the
// next attempt, and again after it, for the pre-delete hooks the
// uninstall itself ran.
//
// checkHooks, when set, is told the objects of the hooks the uninstall
// runs (pre- and post-delete, of the last revision) before it starts: a
// refusal leaves the release, and no hook runs. What their names stand
// on may have appeared since the install checked them.
func (r *Releases) UninstallOwned(ctx context.Context, configs ConfigFactory, owner string, o ActionOptions, checkHooks, removeHooks HookFunc) error {
	cfg, err := configs(o.Namespace)
	if err != nil {
		return err
	}
	rls, err := LastRelease(cfg, o.ReleaseName)
	if err != nil {
		return fmt.Errorf("reading release %s/%s: %w", o.Namespace, o.ReleaseName, err)
	}
	if rls == nil {
		return nil
	}
	if !ReleaseOwnedBy(rls, owner) {
		log.FromContext(ctx).Info("leaving a release this environment does not own", "release", o.ReleaseName, "namespace", o.Namespace)
		return nil
	}
	if checkHooks != nil {
		deleteHooks, err := uninstallHooks(rls)
		if err != nil {
			return fmt.Errorf("reading the hooks of release %s/%s: %w", o.Namespace, o.ReleaseName, err)
		}
		if len(deleteHooks) > 0 {
			if err := checkHooks(ctx, deleteHooks); err != nil {
				return err
			}
		}
	}
	var hooks []*unstructured.Unstructured
	if removeHooks != nil {
		if hooks, err = releaseHooks(cfg.Releases.History, o.ReleaseName); err != nil {
			return fmt.Errorf("reading the hooks of release %s/%s: %w", o.Namespace, o.ReleaseName, err)
		}
		if err := removeHooks(ctx, hooks); err != nil {
			return fmt.Errorf("removing the hooks of release %s/%s: %w", o.Namespace, o.ReleaseName, err)
		}
	}
	if _, err := Uninstall(cfg, o); err != nil {
		return fmt.Errorf("uninstalling release %s/%s: %w", o.Namespace, o.ReleaseName, err)
	}
	r.written.forget(o.Namespace, o.ReleaseName)
	if removeHooks != nil {
		if err := removeHooks(ctx, hooks); err != nil {
			return fmt.Errorf("removing the hooks of release %s/%s after uninstalling it: %w", o.Namespace, o.ReleaseName, err)
		}
	}
	return nil
}

// uninstallHooks parses the objects of the hooks an uninstall of rls runs.
func uninstallHooks(rls *release.Release) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, h := range rls.Hooks {
		if !slices.Contains(h.Events, release.HookPreDelete) && !slices.Contains(h.Events, release.HookPostDelete) {
			continue
		}
		objs, err := parseManifests([]byte(h.Manifest))
		if err != nil {
			return nil, fmt.Errorf("hook %s: %w", h.Path, err)
		}
		out = append(out, objs...)
	}
	return out, nil
}

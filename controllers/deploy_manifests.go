package controllers

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/deploy"
	"github.com/devloop-dev/devloop/internal/fault"
)

// maxInventory is the most objects one manifests component may apply: the
// inventory lives in status, which must stay well below the object size
// limit (the CRD caps the list at the same number).
const maxInventory = 256

// reconcileManifests renders the component's manifests, pins the built
// images, applies them, prunes what left the set, and checks readiness.
// The inventory in status is widened to old ∪ new before applying, so an
// apply that fails half-way loses track of nothing; it is narrowed to what
// was applied only once the stale objects are pruned.
func (e *DeployEngine) reconcileManifests(ctx context.Context, env *v1alpha1.DevEnvironment, c *v1alpha1.Component, st *v1alpha1.ComponentStatus, in *ComponentInputs, cl client.Client, images []deploy.BuiltImage) (ComponentResult, error) {
	m := c.Manifests
	art, err := in.Artifact(m.Source)
	if err != nil {
		return ComponentResult{}, err
	}
	ns := m.Namespace
	if ns == "" {
		ns = env.Namespace
	}
	objs, err := deploy.Render(art.Dir, m.Paths, ns, e.Mapper)
	if err != nil {
		return ComponentResult{}, err
	}
	if _, err := deploy.RewriteImages(objs, images); err != nil {
		return ComponentResult{}, err
	}
	old := fromStatusInventory(st.Inventory)
	widened := deploy.Union(old, deploy.NewInventory(objs))
	if n := len(widened.Entries); n > maxInventory {
		return ComponentResult{}, fault.Permanentf("manifests: %d objects (with those to prune), more than the %d one component may apply: split it", n, maxInventory)
	}
	st.Inventory = toStatusInventory(widened)

	applied, err := deploy.Apply(ctx, cl, objs, deploy.ApplyOptions{Environment: environmentLabel(env), Component: c.Name})
	if err != nil {
		return ComponentResult{}, err
	}
	if _, err := deploy.Prune(ctx, cl, environmentLabel(env), deploy.Diff(old, applied)); err != nil {
		return ComponentResult{}, fmt.Errorf("pruning: %w", err)
	}
	st.Inventory = toStatusInventory(applied)
	return readiness(ctx, cl, applied.Entries, fmt.Sprintf("%d objects applied", len(applied.Entries)))
}

// readiness is Ready when every object is Current by kstatus, else
// Deploying with what it waits for.
func readiness(ctx context.Context, cl client.Reader, refs []deploy.ObjRef, done string) (ComponentResult, error) {
	notReady, err := deploy.Ready(ctx, cl, refs)
	if err != nil {
		return ComponentResult{}, err
	}
	if len(notReady) > 0 {
		return ComponentResult{Phase: v1alpha1.PhaseDeploying, Message: done + "; " + waitingMessage(notReady)}, nil
	}
	return ComponentResult{Phase: v1alpha1.PhaseReady, Message: done + ", all Current"}, nil
}

func toStatusInventory(inv deploy.Inventory) []v1alpha1.ObjectRef {
	out := make([]v1alpha1.ObjectRef, 0, len(inv.Entries))
	for _, r := range inv.Entries {
		out = append(out, v1alpha1.ObjectRef{Group: r.Group, Version: r.Version, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name})
	}
	return out
}

func fromStatusInventory(refs []v1alpha1.ObjectRef) deploy.Inventory {
	var inv deploy.Inventory
	for _, r := range refs {
		inv.Entries = append(inv.Entries, deploy.ObjRef{Group: r.Group, Version: r.Version, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name})
	}
	return inv
}

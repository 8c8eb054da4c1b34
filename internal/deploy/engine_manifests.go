package deploy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/message"
	"github.com/devloop-dev/devloop/internal/source"
	"github.com/devloop-dev/devloop/internal/timeline"
)

// reconcileManifests renders the component's manifests, pins the built
// images, applies them, prunes what left the set, and checks readiness.
// The inventory in status is widened to old ∪ new and saved (progress)
// before applying, so a process that dies half-way loses track of
// nothing; an apply that fails narrows it to old ∪ what was applied, so
// what was never created is never deleted; it is narrowed to what was
// applied once the stale objects are pruned.
func (e *Engine) reconcileManifests(ctx context.Context, env *v1alpha1.DevEnvironment, c *v1alpha1.Component, st *v1alpha1.ComponentStatus, sources source.Resolved, cl client.Client, images []BuiltImage, progress Progress) (Result, error) {
	m := c.Manifests
	art, err := sources.Artifact(ctx, m.Source)
	if err != nil {
		return Result{}, err
	}
	ns := m.Namespace
	if ns == "" {
		ns = env.Namespace
	}
	objs, err := e.renderManifests(art.Dir, m.Paths, ns)
	if err != nil {
		return Result{}, err
	}
	// Patches go over each fresh render once, before the images are
	// pinned, so a patch that names a built image gets it pinned too.
	patches, err := CompilePatches(componentField(env, c)+".manifests.patches", m.Patches, ns)
	if err != nil {
		return Result{}, err
	}
	if objs, err = patches.ApplyAll(objs); err != nil {
		return Result{}, err
	}
	if _, err := RewriteImages(objs, images); err != nil {
		return Result{}, err
	}
	old := fromStatusInventory(st.Inventory)
	widened := Union(old, NewInventory(objs))
	if err := fitsInventory(env, c.Name, widened); err != nil {
		return Result{}, err
	}
	grows := len(widened.Entries) > len(old.Entries)
	st.Inventory = toStatusInventory(widened)
	if grows && progress != nil {
		progress(fmt.Sprintf("component %s: applying %d objects", c.Name, len(objs)))
	}

	opts := e.applyOptions(env, c)
	opts.Adopt = m.Adopt
	known := map[ObjRef]bool{}
	for _, r := range old.Entries {
		known[r] = true
	}
	opts.Known = func(r ObjRef) bool { return known[r] }
	digest, err := manifestsDigest(objs)
	if err != nil {
		return Result{}, err
	}
	// Drift is looked for only while the objects to apply are those last
	// applied: what differs then was changed by hand, and the Apply below
	// puts it back. A changed source or image is an update, not drift.
	key := appliedKey(string(env.UID), c.Name)
	var drift []string
	if st.AppliedDigest == digest {
		refs := NewInventory(objs).Entries
		if rec, ok := e.book().get(key); ok && rec.digest == digest {
			// Applied by this process: nothing to apply unless something
			// drifted (applied.go).
			res, found, done, err := e.unchangedManifests(ctx, env, c, cl, key, rec, objs, refs, opts)
			if done || err != nil {
				if err == nil {
					st.Drift = nil
				}
				return res, err
			}
			drift = found
		} else if drift, err = Drift(ctx, cl, objs, opts); err != nil {
			return Result{}, fmt.Errorf("looking for drift: %w", err)
		}
	}
	st.Drift = nil
	// Applying is the change timeline's Deploy step (internal/timeline).
	defer timeline.Mark(ctx, timeline.Deploy, time.Now())
	var replaced []string
	opts.Replaced = func(ref ObjRef) {
		replaced = append(replaced, ref.String())
		log.FromContext(ctx).Info("replaced an object whose immutable fields changed", "component", c.Name, "object", ref.String())
	}
	e.book().forget(key)
	done, err := Apply(ctx, cl, objs, opts)
	if err != nil {
		st.Inventory = toStatusInventory(Union(old, done))
		return Result{}, err
	}
	st.AppliedDigest = digest
	st.Drift = boundDrift(drift)
	if _, err := Prune(ctx, cl, opts, Diff(old, done)); err != nil {
		return Result{}, fmt.Errorf("pruning: %w", err)
	}
	st.Inventory = toStatusInventory(done)
	// Versions are recorded by the next reconcile's check, not taken from
	// reads now: one found as wanted by the dry run is certain.
	e.book().set(key, appliedRecord{digest: digest})
	msg := appliedMessage(len(done.Entries))
	if len(replaced) > 0 {
		msg += fmt.Sprintf(", %s deleted and created again (a field that cannot change did)", strings.Join(replaced, ", "))
	}
	return readiness(ctx, env, c, cl, done.Entries, msg)
}

func appliedMessage(n int) string { return fmt.Sprintf("%d objects applied", n) }

// unchangedManifests is the no-op of a component whose objects this
// process applied with the same digest: readiness is read, and when every
// object is still at the version it was found in sync at, or the dry run
// finds no drift in those that moved (their versions recorded for next
// time), that is all (done). Otherwise the caller applies and reports
// the drift found.
func (e *Engine) unchangedManifests(ctx context.Context, env *v1alpha1.DevEnvironment, c *v1alpha1.Component, cl client.Client, key string, rec appliedRecord, objs []*unstructured.Unstructured, refs []ObjRef, opts ApplyOptions) (res Result, drift []string, done bool, err error) {
	r, read, err := checkVersions(ctx, snapshotted(ctx, cl, opts.Environment), refs, c.Health)
	if err != nil {
		return Result{}, nil, false, err
	}
	if !unchangedSince(rec.inSync, read, refs) {
		drift, inSync, err := driftVersions(ctx, cl, objs, opts)
		if err != nil {
			return Result{}, nil, false, fmt.Errorf("looking for drift: %w", err)
		}
		if len(drift) > 0 {
			return Result{}, drift, false, nil
		}
		rec.inSync = inSync
		e.book().set(key, rec)
	}
	return readinessResult(env, c, r, appliedMessage(len(refs))), nil, true, nil
}

// Bounds of ComponentStatus.Drift, as the CRD declares them.
const (
	maxDriftLines   = 16
	maxDriftLineLen = 256
)

// boundDrift fits drift lines into status: at most maxDriftLines, the last
// saying how many more objects drifted, each cut to maxDriftLineLen bytes.
func boundDrift(drift []string) []string {
	if len(drift) == 0 {
		return nil
	}
	out := make([]string, 0, min(len(drift), maxDriftLines))
	for i, l := range drift {
		if i == maxDriftLines-1 && len(drift) > maxDriftLines {
			out = append(out, fmt.Sprintf("and %d more objects changed by hand", len(drift)-i))
			break
		}
		out = append(out, message.Truncate(l, maxDriftLineLen))
	}
	return out
}

// manifestsDigest is the sha256 of the objects to apply, in order.
func manifestsDigest(objs []*unstructured.Unstructured) (string, error) {
	h := sha256.New()
	for _, o := range objs {
		b, err := json.Marshal(o.Object)
		if err != nil {
			return "", fmt.Errorf("hashing %s: %w", o.GetName(), err)
		}
		h.Write(b)
		h.Write([]byte{'\n'})
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// pullHint names the field a built image's reference came from when a
// line reports that image failing to pull: the reference is the
// environment's, not the chart's.
func pullHint(env *v1alpha1.DevEnvironment, line string) string {
	reg := env.Spec.Registry
	if reg == nil || !(strings.Contains(line, "ImagePull") || strings.Contains(line, "ErrImagePull") || strings.Contains(line, "InvalidImageName")) {
		return ""
	}
	if reg.PullPrefix != "" && strings.Contains(line, "(image "+strings.TrimSuffix(reg.PullPrefix, "/")+"/") {
		return fmt.Sprintf(" (the node pulls built images from spec.registry.pullPrefix %q: check it names the registry as nodes reach it)", reg.PullPrefix)
	}
	if reg.PullPrefix == "" && strings.Contains(line, "(image "+strings.TrimSuffix(reg.Prefix, "/")+"/") {
		return fmt.Sprintf(" (the node pulls built images from spec.registry.prefix %q; set spec.registry.pullPrefix if nodes reach the registry at another address)", reg.Prefix)
	}
	return ""
}

func toStatusInventory(inv Inventory) []v1alpha1.ObjectRef {
	out := make([]v1alpha1.ObjectRef, 0, len(inv.Entries))
	for _, r := range inv.Entries {
		out = append(out, v1alpha1.ObjectRef{Group: r.Group, Version: r.Version, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name})
	}
	return out
}

func fromStatusInventory(refs []v1alpha1.ObjectRef) Inventory {
	var inv Inventory
	for _, r := range refs {
		inv.Entries = append(inv.Entries, ObjRef{Group: r.Group, Version: r.Version, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name})
	}
	return inv
}

package deploy

import (
	"context"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Prune deletes the stale objects (see Diff) that the environment opts
// names created (ownedBy), and returns those it deleted. Objects already
// gone are skipped; so are objects someone else created — a Namespace that
// existed before devloop applied it, a same-named environment's in another
// namespace. Namespaces and CRDs go last: deleting them deletes what they
// hold, which may still be listed.
func Prune(ctx context.Context, c client.Client, opts ApplyOptions, stale []ObjRef) (deleted []ObjRef, err error) {
	ordered := slices.Clone(stale)
	slices.SortStableFunc(ordered, func(a, b ObjRef) int { return pruneRank(a) - pruneRank(b) })
	for _, ref := range ordered {
		o := &unstructured.Unstructured{}
		o.SetGroupVersionKind(ref.GroupVersionKind())
		err := c.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, o)
		if apierrors.IsNotFound(err) || isGoneKind(err) {
			continue
		}
		if err != nil {
			return deleted, classify(c, err, "get", ref)
		}
		if !ownedBy(o, opts) || o.GetDeletionTimestamp() != nil {
			continue
		}
		// Only delete the object that was read: a recreated one of the same
		// name is left for the next round to judge.
		err = c.Delete(ctx, o, client.PropagationPolicy(metav1.DeletePropagationBackground),
			client.Preconditions{UID: ptr(o.GetUID())})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return deleted, classify(c, err, "delete", ref)
		}
		deleted = append(deleted, ref)
	}
	return deleted, nil
}

// isGoneKind is a stale object whose kind is no longer served (its CRD was
// pruned first, or removed by hand): nothing is left to delete.
func isGoneKind(err error) bool {
	return meta.IsNoMatchError(err)
}

func pruneRank(r ObjRef) int {
	switch {
	case r.Kind == "Namespace" && r.Group == "":
		return 2
	case r.Kind == "CustomResourceDefinition":
		return 1
	}
	return 0
}

func ptr[T any](v T) *T { return &v }

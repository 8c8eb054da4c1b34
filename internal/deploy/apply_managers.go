package deploy

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// migrateLegacyManager moves what the shared legacy field manager
// (FieldManager, used by every environment before each had its own) owns
// on o to manager, the environment's own, and drops the legacy entry, the
// way client-go's csaupgrade moves client-side apply managers: the
// legacy entry's field set is merged into manager's Apply entry. Merging,
// not just dropping, keeps server-side apply's promise across the upgrade:
// a field the old manifest set and the new one no longer does is removed
// by the next apply, not left behind unowned. o is the object as the apply
// that made manager's entry returned it; only objects this environment
// owns are migrated (a shared Namespace's legacy entry may be another
// environment's). Nothing is written when there is no legacy entry, so it
// costs nothing once an object was migrated. A conflicting write in
// between (the patch is guarded by resourceVersion) leaves the entry for
// the next apply.
func migrateLegacyManager(ctx context.Context, c client.Client, o *unstructured.Unstructured, manager string) error {
	if manager == FieldManager {
		return nil
	}
	entries := o.GetManagedFields()
	legacy, own := -1, -1
	for i, e := range entries {
		if e.Operation != metav1.ManagedFieldsOperationApply || e.Subresource != "" {
			continue
		}
		switch e.Manager {
		case FieldManager:
			legacy = i
		case manager:
			own = i
		}
	}
	if legacy < 0 {
		return nil
	}
	migrated := make([]metav1.ManagedFieldsEntry, 0, len(entries)-1)
	for i, e := range entries {
		switch {
		case i == legacy:
			continue
		case i == own && e.APIVersion == entries[legacy].APIVersion:
			merged, err := mergeFieldSets(e.FieldsV1, entries[legacy].FieldsV1)
			if err != nil {
				return fmt.Errorf("migrating field manager %q of %s: %w", FieldManager, describe(c, RefOf(o)), err)
			}
			e.FieldsV1 = merged
		}
		migrated = append(migrated, e)
	}
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/resourceVersion", "value": o.GetResourceVersion()},
		{"op": "replace", "path": "/metadata/managedFields", "value": migrated},
	})
	if err != nil {
		return err
	}
	target := &unstructured.Unstructured{}
	target.SetGroupVersionKind(o.GroupVersionKind())
	target.SetNamespace(o.GetNamespace())
	target.SetName(o.GetName())
	err = c.Patch(ctx, target, client.RawPatch(types.JSONPatchType, patch))
	if isConflictOrTestFailed(err) {
		return nil // changed meanwhile: the next apply migrates it
	}
	if err != nil {
		return err
	}
	o.SetManagedFields(target.GetManagedFields())
	o.SetResourceVersion(target.GetResourceVersion())
	return nil
}

// isConflictOrTestFailed reports a JSON patch whose resourceVersion test
// failed (the object changed since it was read).
func isConflictOrTestFailed(err error) bool {
	if err == nil {
		return false
	}
	return apierrors.IsConflict(err) || apierrors.IsInvalid(err)
}

// mergeFieldSets is the union of two managedFields field sets (FieldsV1:
// nested JSON objects whose leaves are empty objects).
func mergeFieldSets(a, b *metav1.FieldsV1) (*metav1.FieldsV1, error) {
	var ma, mb map[string]any
	if a != nil && len(a.Raw) > 0 {
		if err := json.Unmarshal(a.Raw, &ma); err != nil {
			return nil, err
		}
	}
	if b != nil && len(b.Raw) > 0 {
		if err := json.Unmarshal(b.Raw, &mb); err != nil {
			return nil, err
		}
	}
	raw, err := json.Marshal(unionFields(ma, mb))
	if err != nil {
		return nil, err
	}
	return &metav1.FieldsV1{Raw: raw}, nil
}

func unionFields(a, b map[string]any) map[string]any {
	out := make(map[string]any, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, bv := range b {
		av, ok := out[k]
		if !ok {
			out[k] = bv
			continue
		}
		am, aok := av.(map[string]any)
		bm, bok := bv.(map[string]any)
		if aok && bok {
			out[k] = unionFields(am, bm)
		}
	}
	return out
}

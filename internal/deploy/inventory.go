package deploy

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ObjRef identifies an applied object. Version is the version it was
// applied and is read with; identity (Diff, String) ignores it, since
// the same object is served under every version of its kind.
type ObjRef struct {
	Group     string `json:"group,omitempty"`
	Version   string `json:"version,omitempty"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// RefOf is the reference of an object.
func RefOf(o *unstructured.Unstructured) ObjRef {
	gvk := o.GroupVersionKind()
	return ObjRef{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Namespace: o.GetNamespace(), Name: o.GetName()}
}

// GroupVersionKind of the object.
func (r ObjRef) GroupVersionKind() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}
}

// String is kind.group/name, prefixed by namespace/ when namespaced, e.g.
// "team-a/Deployment.apps/web".
func (r ObjRef) String() string {
	s := r.Kind
	if r.Group != "" {
		s += "." + r.Group
	}
	s += "/" + r.Name
	if r.Namespace != "" {
		s = r.Namespace + "/" + s
	}
	return s
}

// key is the identity of the object, without version.
func (r ObjRef) key() ObjRef { r.Version = ""; return r }

// Inventory is what one component applied, sorted, so that objects leaving
// the set can be pruned on the next apply. It is plain JSON: it can be
// kept in the DevEnvironment status or, for large sets, in a ConfigMap
// (see Encode and DecodeInventory).
type Inventory struct {
	Entries []ObjRef `json:"entries,omitempty"`
}

// NewInventory records objs.
func NewInventory(objs []*unstructured.Unstructured) Inventory {
	inv := Inventory{Entries: make([]ObjRef, 0, len(objs))}
	for _, o := range objs {
		inv.Entries = append(inv.Entries, RefOf(o))
	}
	slices.SortFunc(inv.Entries, compareRefs)
	return inv
}

// Diff returns the objects of old that are not in new: those to prune.
func Diff(old, new Inventory) (stale []ObjRef) {
	keep := map[ObjRef]bool{}
	for _, r := range new.Entries {
		keep[r.key()] = true
	}
	for _, r := range old.Entries {
		if !keep[r.key()] {
			stale = append(stale, r)
		}
	}
	return stale
}

// Encode is the inventory as one JSON document, for a ConfigMap key.
func (inv Inventory) Encode() (string, error) {
	b, err := json.Marshal(inv)
	return string(b), err
}

// DecodeInventory reads what Encode wrote.
func DecodeInventory(s string) (Inventory, error) {
	var inv Inventory
	if err := json.Unmarshal([]byte(s), &inv); err != nil {
		return Inventory{}, fmt.Errorf("decoding inventory: %w", err)
	}
	return inv, nil
}

func compareRefs(a, b ObjRef) int {
	return cmp.Or(strings.Compare(a.Group, b.Group), strings.Compare(a.Kind, b.Kind),
		strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
}

// Union is every object of a and b, for recording before an apply that may
// fail half-way: what it created is then pruned later if it leaves the set.
func Union(a, b Inventory) Inventory {
	seen := map[ObjRef]bool{}
	var out Inventory
	for _, r := range append(slices.Clone(b.Entries), a.Entries...) { // b's versions win
		if !seen[r.key()] {
			seen[r.key()] = true
			out.Entries = append(out.Entries, r)
		}
	}
	slices.SortFunc(out.Entries, compareRefs)
	return out
}

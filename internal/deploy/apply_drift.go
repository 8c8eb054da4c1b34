package deploy

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// maxDriftFields bounds the fields named per drifted object.
const maxDriftFields = 3

// Drift reports objects of objs whose live state differs from what Apply
// would make of them — changed or deleted by hand — one line each, e.g.
// "deployments.apps/web: spec.replicas changed by hand". It asks the API
// server with a server-side apply dry run, so defaulting, field ownership
// and admission are exactly those of a real apply; nothing is written.
// The next Apply corrects what it reports. Fields devloop does not set
// (a replica count it leaves to an autoscaler, say) are never drift.
func Drift(ctx context.Context, c client.Client, objs []*unstructured.Unstructured, opts ApplyOptions) (drifted []string, err error) {
	drifted, _, err = driftVersions(ctx, c, objs, opts)
	return drifted, err
}

// driftVersions is Drift, also returning the resourceVersion of each
// object it found as wanted: until that version changes, the object
// cannot have drifted, and need not be asked about again.
func driftVersions(ctx context.Context, c client.Client, objs []*unstructured.Unstructured, opts ApplyOptions) (drifted []string, inSync Versions, err error) {
	inSync = Versions{}
	for _, o := range objs {
		ref := RefOf(o)
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(ref.GroupVersionKind())
		err := c.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, live)
		if apierrors.IsNotFound(err) {
			drifted = append(drifted, describe(c, ref)+": deleted by hand")
			continue
		}
		if err != nil {
			return nil, nil, classify(c, err, "get", ref)
		}
		want := o.DeepCopy()
		if err := applyOne(ctx, c, want, opts, client.DryRunAll); err != nil {
			return nil, nil, err
		}
		fields := diffFields(comparable(live), comparable(want), "")
		if len(fields) == 0 {
			inSync[ref] = live.GetResourceVersion()
			continue
		}
		if len(fields) > maxDriftFields {
			fields = append(fields[:maxDriftFields], fmt.Sprintf("%d more", len(fields)-maxDriftFields))
		}
		drifted = append(drifted, fmt.Sprintf("%s: %s changed by hand", describe(c, ref), strings.Join(fields, ", ")))
	}
	return drifted, inSync, nil
}

// comparable drops what changes on every write without being content.
func comparable(u *unstructured.Unstructured) map[string]any {
	m := u.DeepCopy().Object
	for _, f := range []string{"managedFields", "resourceVersion", "generation", "creationTimestamp", "uid"} {
		unstructured.RemoveNestedField(m, "metadata", f)
	}
	delete(m, "status")
	return m
}

// diffFields lists the dotted paths where a and b differ, sorted.
func diffFields(a, b map[string]any, prefix string) []string {
	var out []string
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	for k := range keys {
		path := k
		if prefix != "" {
			path = prefix + "." + k
		}
		am, aok := a[k].(map[string]any)
		bm, bok := b[k].(map[string]any)
		switch {
		case aok && bok:
			out = append(out, diffFields(am, bm, path)...)
		case !reflect.DeepEqual(a[k], b[k]):
			out = append(out, path)
		}
	}
	slices.Sort(out)
	return out
}

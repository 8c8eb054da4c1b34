package deploy

import (
	"helm.sh/helm/v3/pkg/release"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ReleaseObjects lists the objects a release's manifest holds, for
// readiness checks: the release is the inventory of a Helm component.
// Hooks and the chart's crds/ directory are not in the manifest and are not
// listed. A namespaced object that names no namespace is in the release's
// namespace; mapper says which kinds are namespaced, and a kind it does not
// know is taken as namespaced when the object names no namespace.
func ReleaseObjects(rls *release.Release, mapper meta.RESTMapper) ([]ObjRef, error) {
	objs, err := ReleaseManifest(rls, mapper)
	if err != nil {
		return nil, err
	}
	refs := make([]ObjRef, 0, len(objs))
	for _, o := range objs {
		refs = append(refs, RefOf(o))
	}
	return refs, nil
}

// ReleaseManifest parses the objects of a release's manifest, as the
// post-renderer left them, each namespaced one with its namespace set (see
// ReleaseObjects): what a drift check compares the live objects with.
func ReleaseManifest(rls *release.Release, mapper meta.RESTMapper) ([]*unstructured.Unstructured, error) {
	if rls == nil {
		return nil, nil
	}
	objs, err := parseManifests([]byte(rls.Manifest))
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if o.GetNamespace() == "" && namespaced(mapper, RefOf(o)) {
			o.SetNamespace(rls.Namespace)
		}
	}
	return objs, nil
}

func namespaced(mapper meta.RESTMapper, ref ObjRef) bool {
	if mapper == nil {
		return true
	}
	m, err := mapper.RESTMapping(ref.GroupVersionKind().GroupKind(), ref.Version)
	if err != nil {
		return true
	}
	return m.Scope.Name() == meta.RESTScopeNameNamespace
}

package helm

import (
	"fmt"
	"time"

	"helm.sh/helm/v3/pkg/release"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Revision is one stored revision of a release as the deploy engine reads
// it, in plain values: Helm's release type stays in this package.
type Revision struct {
	ReleaseInfo
	// LastDeployed is when the revision's last action ran.
	LastDeployed time.Time
	// Manifest is the release's rendered manifest, as the post-renderer
	// left it; hooks and the chart's crds/ are not in it.
	Manifest string
}

// revisionOf is rls as a Revision; nil for nil.
func revisionOf(rls *release.Release) *Revision {
	if rls == nil {
		return nil
	}
	rev := &Revision{ReleaseInfo: infoOf(rls), Manifest: rls.Manifest}
	if rls.Info != nil {
		rev.LastDeployed = rls.Info.LastDeployed.Time
	}
	return rev
}

// DeployedWith says the revision is deployed and was made from digest (a
// ReleaseRequest's Digest): nothing has changed it since.
func (r *Revision) DeployedWith(digest string) bool {
	return r != nil && r.Status == string(release.StatusDeployed) && r.Digest == digestLabel(digest)
}

// LastRevision reads the highest revision of the release in namespace
// whatever its status, or nil when the release has never been stored.
func LastRevision(configs ConfigFactory, namespace, name string) (*Revision, error) {
	cfg, err := configs(namespace)
	if err != nil {
		return nil, err
	}
	rls, err := LastRelease(cfg, name)
	if err != nil {
		return nil, fmt.Errorf("reading release %s/%s: %w", namespace, name, err)
	}
	return revisionOf(rls), nil
}

// ReleaseManifest parses the objects of a revision's manifest, each
// namespaced one with its namespace set: what readiness checks and a
// drift check compares the live objects with. A namespaced object that
// names no namespace is in the release's namespace; mapper says which
// kinds are namespaced, and a kind it does not know is taken as
// namespaced when the object names no namespace.
func ReleaseManifest(rev *Revision, mapper meta.RESTMapper) ([]*unstructured.Unstructured, error) {
	if rev == nil {
		return nil, nil
	}
	objs, err := parseManifests([]byte(rev.Manifest))
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if o.GetNamespace() == "" && namespaced(mapper, o) {
			o.SetNamespace(rev.Namespace)
		}
	}
	return objs, nil
}

func namespaced(mapper meta.RESTMapper, o *unstructured.Unstructured) bool {
	if mapper == nil {
		return true
	}
	gvk := o.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return true
	}
	return m.Scope.Name() == meta.RESTScopeNameNamespace
}

// releaseHooks parses the hook objects of every stored revision of a
// release, each named once (kind, namespace, name), in the order first
// seen. history is Helm storage's History.
func releaseHooks(history func(name string) ([]*release.Release, error), name string) ([]*unstructured.Unstructured, error) {
	revisions, err := history(name)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []*unstructured.Unstructured
	for _, rls := range revisions {
		for _, h := range rls.Hooks {
			objs, err := parseManifests([]byte(h.Manifest))
			if err != nil {
				return nil, fmt.Errorf("revision %d hook %s: %w", rls.Version, h.Path, err)
			}
			for _, o := range objs {
				key := o.GroupVersionKind().GroupKind().String() + "/" + o.GetNamespace() + "/" + o.GetName()
				if !seen[key] {
					seen[key] = true
					out = append(out, o)
				}
			}
		}
	}
	return out, nil
}

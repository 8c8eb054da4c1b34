package deploy

import (
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/devloop-dev/devloop/internal/deploy/helm"
)

// ReleaseObjects lists the objects a release's manifest holds, for
// readiness checks: the release is the inventory of a Helm component.
// Hooks and the chart's crds/ directory are not in the manifest and are not
// listed. Namespaces are filled in as helm.ReleaseManifest says.
func ReleaseObjects(rev *helm.Revision, mapper meta.RESTMapper) ([]ObjRef, error) {
	objs, err := helm.ReleaseManifest(rev, mapper)
	if err != nil {
		return nil, err
	}
	refs := make([]ObjRef, 0, len(objs))
	for _, o := range objs {
		refs = append(refs, RefOf(o))
	}
	return refs, nil
}

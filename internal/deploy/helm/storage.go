package helm

import (
	"context"
	"strconv"

	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// How Helm's Secret driver stores releases, read without Helm: the deploy
// engine looks at a release it last deployed cheaply (the storage Secret
// of the deployed revision, which Helm rewrites on every action on the
// release or deletes), instead of building an action configuration and
// listing the history.

var secretGVK = corev1.SchemeGroupVersion.WithKind("Secret")

// ReleaseSecret is the name Helm's Secret driver stores a revision under.
func ReleaseSecret(name string, revision int) string {
	return "sh.helm.release.v1." + name + ".v" + strconv.Itoa(revision)
}

// StoredRevision lists the metadata of the release's storage Secrets and
// returns the resourceVersion of revision's if it is the latest and Helm
// labels it deployed; "" otherwise (gone, superseded, or a newer revision
// pending under someone's helm upgrade). Metadata only: the releases
// themselves, gzipped in the Secrets, are not transferred.
func StoredRevision(ctx context.Context, cl client.Reader, namespace, name string, revision int) (string, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(secretGVK.GroupVersion().WithKind("SecretList"))
	if err := cl.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{"owner": "helm", "name": name}); err != nil {
		return "", err
	}
	version := ""
	for _, m := range list.Items {
		l := m.GetLabels()
		v, err := strconv.Atoi(l["version"])
		switch {
		case err != nil:
			return "", nil
		case v > revision:
			return "", nil
		case v == revision && m.GetName() == ReleaseSecret(name, revision) && l["status"] == string(release.StatusDeployed):
			version = m.GetResourceVersion()
		}
	}
	return version, nil
}

package cli

import (
	"net/http"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// knownKinds are the kinds the plugin reads most, and their scope: found
// without asking the API server. Its discovery is two round trips before
// a process's first read (each a link's round trip when the cluster is
// across a network); any other kind is still found by discovery.
var knownKinds = map[schema.GroupVersionKind]meta.RESTScope{
	v1alpha1.GroupVersion.WithKind("DevEnvironment"): meta.RESTScopeNamespace,
	corev1.SchemeGroupVersion.WithKind("Pod"):        meta.RESTScopeNamespace,
	corev1.SchemeGroupVersion.WithKind("Secret"):     meta.RESTScopeNamespace,
	corev1.SchemeGroupVersion.WithKind("ConfigMap"):  meta.RESTScopeNamespace,
	corev1.SchemeGroupVersion.WithKind("Service"):    meta.RESTScopeNamespace,
	corev1.SchemeGroupVersion.WithKind("Event"):      meta.RESTScopeNamespace,
	corev1.SchemeGroupVersion.WithKind("Namespace"):  meta.RESTScopeRoot,
	appsv1.SchemeGroupVersion.WithKind("Deployment"): meta.RESTScopeNamespace,
	batchv1.SchemeGroupVersion.WithKind("Job"):       meta.RESTScopeNamespace,
}

// restMapper maps knownKinds at once and any other kind by discovery
// (discovered, also returned: it says whether an API is served at all).
func restMapper(cfg *rest.Config, httpClient *http.Client) (mapper, discovered meta.RESTMapper, err error) {
	discovered, err = apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, nil, err
	}
	known := meta.NewDefaultRESTMapper(nil)
	for gvk, scope := range knownKinds {
		known.Add(gvk, scope)
	}
	return meta.FirstHitRESTMapper{MultiRESTMapper: meta.MultiRESTMapper{known, discovered}}, discovered, nil
}

package operator

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// WatchScope is what one operator instance caches: the environments it
// reconciles and, of everything else, only what devloop made for them.
type WatchScope struct {
	// Namespace, when set, is the only namespace watched.
	Namespace string
	// Environments selects the DevEnvironments this instance reconciles
	// (--watch-label-selector, for sharding); nil or empty: all of them.
	Environments labels.Selector
}

// OwnedJobRoles are the devloop.dev/role values of the Jobs devloop
// creates: builder and test Jobs. Deployed Jobs (a chart's hooks, a
// user's manifests) carry devloop.dev/environment too, but no role, and
// stay out of the cache.
var OwnedJobRoles = []string{v1alpha1.RoleBuild, v1alpha1.RoleTest}

// CacheOptions are the manager's cache options for scope. The cache holds
// three kinds only: DevEnvironments (those scope selects), the Jobs
// devloop created and the pods running under its live update supervisor;
// everything else (other pods, Secrets, what environments deploy) is read
// uncached, through the APIReader or the tenant's client.
// Reading any other kind through the cached client fails
// (ErrResourceNotCached) instead of silently starting an informer over
// every object of that kind in the cluster.
func CacheOptions(scope WatchScope) cache.Options {
	roles, err := labels.NewRequirement(v1alpha1.LabelRole, selection.In, OwnedJobRoles)
	if err != nil {
		panic(err) // constant input
	}
	opts := cache.Options{
		ReaderFailOnMissingInformer: true,
		// Nothing devloop reads from the cache looks at managed fields,
		// the largest part of most objects.
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&batchv1.Job{}: {Label: labels.NewSelector().Add(*roles)},
			// The pods whose containers run under the live update
			// supervisor, watched to sync one as soon as it runs.
			&corev1.Pod{}: {Label: labels.SelectorFromSet(labels.Set{v1alpha1.LabelLiveUpdate: v1alpha1.LiveUpdateSupervised})},
		},
	}
	if scope.Environments != nil && !scope.Environments.Empty() {
		opts.ByObject[&v1alpha1.DevEnvironment{}] = cache.ByObject{Label: scope.Environments}
	}
	if scope.Namespace != "" {
		opts.DefaultNamespaces = map[string]cache.Config{scope.Namespace: {}}
	}
	return opts
}

package build

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/memo"
	"github.com/devloop-dev/devloop/internal/pods"
)

// A build cache claim is keyed by what shares it (source, builder image,
// cache paths): a new run.image, or the operator before shared claims
// ("<env>-<image>-<hash>-cache"), leaves a claim nothing mounts any more,
// holding its storage until the environment goes. When the environment
// first mounts a claim (once per claim and operator process), its build
// cache claims no image or suite of the spec mounts are deleted, as the
// tenant. Best effort: a ServiceAccount that may not list or delete
// claims keeps them, and the build goes on.

// removeUnusedCacheClaims deletes env's build cache claims other than
// those its spec's images and suites mount, once per claim in use.
func (s *imageBuilds) removeUnusedCacheClaims(ctx context.Context, tenant client.Client, inUse string) {
	key := memo.Key(s.env.UID, "cache-claims/"+inUse)
	if _, done := s.e.recent.Get(key); done {
		return
	}
	s.e.recent.Put(key, memoEntry{at: time.Now()})
	keep := map[string]bool{}
	for _, c := range s.env.Spec.Components {
		for i := range c.Images {
			if share, ok := pods.ImageCacheShare(s.env, &c.Images[i]); ok {
				keep[share.Claim] = true
			}
		}
	}
	for i := range s.env.Spec.Tests {
		if share, ok := pods.SuiteCacheShare(s.env, &s.env.Spec.Tests[i]); ok {
			keep[share.Claim] = true
		}
	}
	claims := &corev1.PersistentVolumeClaimList{}
	if err := tenant.List(ctx, claims, client.InNamespace(s.env.Namespace), client.MatchingLabels{
		v1alpha1.LabelEnvironment: v1alpha1.LabelValue(s.env.Name), v1alpha1.LabelRole: v1alpha1.RoleBuildCache,
	}); err != nil {
		log.FromContext(ctx).Info("unused build cache claims not looked for", "error", err.Error())
		return
	}
	for i := range claims.Items {
		pvc := &claims.Items[i]
		if keep[pvc.Name] || !metav1.IsControlledBy(pvc, s.env) || !pvc.DeletionTimestamp.IsZero() {
			continue
		}
		log.FromContext(ctx).Info("removing a build cache claim nothing mounts any more", "claim", pvc.Name, "now", inUse)
		if err := tenant.Delete(ctx, pvc, client.Preconditions{UID: &pvc.UID}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			log.FromContext(ctx).Info("unused build cache claim kept", "claim", pvc.Name, "error", err.Error())
		}
	}
}

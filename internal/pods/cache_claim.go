package pods

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/internal/identity"
)

// CacheClaim is a cache PersistentVolumeClaim of an environment: a build
// cache (one per image) or a test cache (one per suite).
type CacheClaim struct {
	Name   string
	What   string // "build cache claim", "test cache claim"
	Labels map[string]string
	Size   *resource.Quantity
}

// EnsureCacheClaim creates the claim once, as the tenant, owned by env: it
// outlives the Jobs that mount it, so the next one starts warm, and goes
// with the environment. A claim of that name env does not control is
// never used (ok false).
func EnsureCacheClaim(ctx context.Context, tenant client.Client, env *v1alpha1.DevEnvironment, c CacheClaim) (ok bool, err error) {
	pvc := &corev1.PersistentVolumeClaim{}
	err = tenant.Get(ctx, types.NamespacedName{Namespace: env.Namespace, Name: c.Name}, pvc)
	switch {
	case err == nil && metav1.IsControlledBy(pvc, env) && !pvc.DeletionTimestamp.IsZero():
		// Dropped (DropStrandedClaim): a new one once it is gone, not a
		// pod mounting one on its way out.
		return false, &fault.WaitingError{Reason: v1alpha1.ReasonWaiting, RequeueAfter: 2 * time.Second,
			Err: errors.New(droppedClaimMessage(pvc, c.What))}
	case err == nil:
		return metav1.IsControlledBy(pvc, env), nil
	case !apierrors.IsNotFound(err):
		return false, identity.Refused(err, "get "+c.What+" "+c.Name)
	}
	pvc = &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: c.Name, Namespace: env.Namespace, Labels: c.Labels,
			OwnerReferences: []metav1.OwnerReference{env.ControllerRef()}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		},
	}
	if c.Size != nil {
		pvc.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: *c.Size}
	}
	if err := tenant.Create(ctx, pvc); err != nil && !apierrors.IsAlreadyExists(err) {
		return false, identity.Refused(err, "create "+c.What+" "+c.Name)
	}
	return true, nil
}

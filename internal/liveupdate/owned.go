package liveupdate

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/identity"
)

// A live update writes the environment's files into running containers:
// it must reach only the pods of workloads this environment deployed,
// not every pod that happens to run the image reference (one started by
// hand, another environment's, another team's in a namespace the
// environment's ServiceAccount may list). A pod is the environment's when
// it, or an object up its chain of controllers (ReplicaSet, Deployment,
// StatefulSet, DaemonSet, Job, CronJob, or any other controller), carries
// the devloop.dev/owner annotation the deploy engine sets on every
// object it applies or a release of it renders, naming this environment.

// maxOwnerDepth bounds the controllers walked up from a pod (a CronJob's
// pod is three steps from it).
const maxOwnerDepth = 4

// ownership decides, for one sync, which pods are the environment's,
// remembering the controllers it read.
type ownership struct {
	cl client.Reader
	// owner is the environment's devloop.dev/owner value.
	owner string
	// seen are the controllers read, by UID: whether each is the
	// environment's.
	seen map[types.UID]bool
}

func newOwnership(cl client.Reader, owner string) *ownership {
	return &ownership{cl: cl, owner: owner, seen: map[types.UID]bool{}}
}

// owns reports whether pod is the environment's, reading its controllers
// as the tenant; a controller the tenant may not read is an error naming
// the right missing.
func (o *ownership) owns(ctx context.Context, pod *corev1.Pod) (bool, error) {
	var obj metav1.Object = pod
	var walked []types.UID
	owned := false
	for depth := 0; ; depth++ {
		if obj.GetAnnotations()[v1alpha1.AnnotationOwner] == o.owner {
			owned = true
			break
		}
		ref := metav1.GetControllerOfNoCopy(obj)
		if ref == nil || depth == maxOwnerDepth {
			break
		}
		if known, ok := o.seen[ref.UID]; ok {
			owned = known
			break
		}
		walked = append(walked, ref.UID)
		next, err := o.get(ctx, pod.Namespace, ref)
		if err != nil {
			return false, err
		}
		if next == nil {
			break
		}
		obj = next
	}
	for _, uid := range walked {
		o.seen[uid] = owned
	}
	return owned, nil
}

// get reads a pod's controller; nil when it is gone or is not the object
// the reference names (deleted and made again).
func (o *ownership) get(ctx context.Context, namespace string, ref *metav1.OwnerReference) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind))
	err := o.cl.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, u)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, identity.Refused(err, "get "+ref.Kind+" "+namespace+"/"+ref.Name+" to check that its pods are the environment's before live updating them")
	case u.GetUID() != ref.UID:
		return nil, nil
	}
	return u, nil
}

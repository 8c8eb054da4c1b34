package pods

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// UnreadableSecretError is a Secret a pod would mount that the identity
// creating the pod may not read (or that does not exist).
type UnreadableSecretError struct {
	Namespace, Name string
	Err             error
}

func (e *UnreadableSecretError) Error() string {
	return fmt.Sprintf("Secret %s/%s is not readable by the environment's ServiceAccount, so it is not mounted: %v", e.Namespace, e.Name, e.Err)
}

func (e *UnreadableSecretError) Unwrap() error { return e.Err }

// CheckSecretsReadable asks, as cl (the environment's ServiceAccount,
// which creates the pod), for each named Secret's metadata: the kubelet
// mounts any Secret of the pod's namespace, so a pod made for an
// environment must mount only what its ServiceAccount may read itself
// (a pinned source's secretRef is otherwise never read as it). Names may
// be empty. A refusal or a missing Secret is an *UnreadableSecretError;
// other failures are returned as they are, to be retried.
func CheckSecretsReadable(ctx context.Context, cl client.Client, namespace string, names ...string) error {
	for _, name := range names {
		if name == "" {
			continue
		}
		meta := &metav1.PartialObjectMetadata{}
		meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
		err := cl.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, meta)
		switch {
		case err == nil:
		case apierrors.IsForbidden(err) || apierrors.IsNotFound(err):
			return &UnreadableSecretError{Namespace: namespace, Name: name, Err: err}
		default:
			return fmt.Errorf("checking Secret %s/%s: %w", namespace, name, err)
		}
	}
	return nil
}

// SecretNames are the Secrets a pod spec's volumes mount.
func SecretNames(spec *corev1.PodSpec) []string {
	var names []string
	for _, v := range spec.Volumes {
		if v.Secret != nil {
			names = append(names, v.Secret.SecretName)
		}
	}
	return names
}

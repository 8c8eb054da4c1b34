package cli

import (
	"context"
	"fmt"
	"sync"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/ui"
)

// Objects reads the first ui.MaxObjects objects of the component's
// inventory (status.components[].inventory; for a Helm component, its
// release's workloads) as the user, one GET each, and computes their
// kstatus. An object the user may not read is Unknown
// with the refusal as its message; one that is gone is NotFound.
func (u *uiActions) Objects(ctx context.Context, namespace, name, component string) ([]ui.ObjectStatus, int, error) {
	s := u.in(namespace)
	env, err := s.getEnv(ctx, name)
	if err != nil {
		return nil, 0, err
	}
	if env.Spec.Component(component) == nil {
		return nil, 0, fmt.Errorf("devenvironment/%s has no component %q", name, component)
	}
	inv, more := componentObjects(env, component)
	left := max(len(inv)-ui.MaxObjects, 0) + more
	inv = inv[:min(len(inv), ui.MaxObjects)]
	c, err := u.objectsClient(s)
	if err != nil {
		return nil, 0, err
	}
	// A few GETs at a time: 50 one after another are seconds on a remote
	// API server.
	out := make([]ui.ObjectStatus, len(inv))
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i, ref := range inv {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out[i] = objectStatus(ctx, c, ref)
		})
	}
	wg.Wait()
	return out, left, nil
}

// componentObjects are the objects a component's panel shows: what its
// status lists as the component's (OwnedObjects: what its manifests
// applied, its Helm release's workloads), with how many more the status
// left out.
func componentObjects(env *v1alpha1.DevEnvironment, component string) ([]v1alpha1.ObjectRef, int) {
	for _, c := range env.Status.Components {
		if c.Name != component {
			continue
		}
		return c.OwnedObjects()
	}
	return nil, 0
}

// objectsClient is the user's client with room for a panel's GETs: the
// kubeconfig default (5 per second, bursts of 10) would make 50 objects
// take 8 s. Same credentials, same RESTMapper; made once.
func (u *uiActions) objectsClient(s *session) (client.Client, error) {
	u.objOnce.Do(func() {
		cfg := rest.CopyConfig(s.config)
		cfg.QPS, cfg.Burst = 50, 100
		u.objClient, u.objErr = client.New(cfg, client.Options{Scheme: s.client.Scheme(), Mapper: s.client.RESTMapper()})
	})
	return u.objClient, u.objErr
}

// objectStatus is one object's kstatus, read as the user.
func objectStatus(ctx context.Context, c client.Client, ref v1alpha1.ObjectRef) ui.ObjectStatus {
	o := ui.ObjectStatus{Group: ref.Group, Kind: ref.Kind, Namespace: ref.Namespace, Name: ref.Name}
	gvk := schema.GroupVersionKind{Group: ref.Group, Version: ref.Version, Kind: ref.Kind}
	if gvk.Version == "" {
		// An inventory written without versions: the server's preferred one.
		m, err := c.RESTMapper().RESTMapping(gvk.GroupKind())
		if meta.IsNoMatchError(err) {
			o.Status, o.Message = status.NotFoundStatus.String(), "the cluster serves no kind "+gvk.Kind+" in group "+valueOr(gvk.Group, "core")
			return o
		}
		if err != nil {
			o.Status, o.Message = status.UnknownStatus.String(), boundedLine(err.Error(), 300)
			return o
		}
		gvk = m.GroupVersionKind
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	err := c.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, obj)
	switch {
	case apierrors.IsNotFound(err):
		o.Status, o.Message = status.NotFoundStatus.String(), "not found"
		return o
	case meta.IsNoMatchError(err):
		// Its CustomResourceDefinition is gone: so are its objects.
		o.Status, o.Message = status.NotFoundStatus.String(), "the cluster serves no kind "+gvk.Kind+" in "+gvk.GroupVersion().String()
		return o
	case err != nil:
		o.Status, o.Message = status.UnknownStatus.String(), boundedLine(err.Error(), 300)
		return o
	}
	res, err := status.Compute(obj)
	if err != nil {
		o.Status, o.Message = status.UnknownStatus.String(), boundedLine(err.Error(), 300)
		return o
	}
	o.Status, o.Message = res.Status.String(), boundedLine(res.Message, 300)
	return o
}

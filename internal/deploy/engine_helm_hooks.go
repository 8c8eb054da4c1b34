package deploy

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/internal/deploy/helm"
	"github.com/devloop-dev/devloop/internal/fault"
)

// hookOwnerCheck is the ownership guard for a release's hooks: the same
// rule as for every object devloop applies (checkOwner), read as the
// tenant (cl). A hook named like an object this environment did not
// create is refused before Helm runs any hook, naming the object's owner:
// Helm's default before-hook-creation policy would delete that object
// (another environment's ConfigMap, a CRD, a ClusterRole: whatever the
// ServiceAccount may delete) to create the hook in its place. Hooks this
// environment ran before carry its owner annotation (the post-render
// labels them like the manifest) and pass. It checks the hooks an
// install, upgrade or rollback stores and, before an uninstall, its
// pre- and post-delete hooks (UninstallOwned). A hook where the
// ServiceAccount may not read is refused: whose the object there is
// cannot be told, and Helm's delete needs no read.
func hookOwnerCheck(cl client.Client, mapper meta.RESTMapper, namespace string, opts ApplyOptions) helm.HookFunc {
	return func(ctx context.Context, hooks []*unstructured.Unstructured) error {
		for _, h := range hooks {
			o, existing, err := existingHook(ctx, cl, mapper, namespace, h)
			switch {
			case o == nil, apierrors.IsNotFound(err):
				continue // nothing to replace
			case apierrors.IsForbidden(err):
				return fault.Permanentf("helm hook %s goes where %s may be, which this environment's ServiceAccount may not read: devloop cannot tell whose it is, and Helm deletes an existing object named like a hook; grant get on it, or rename the hook in the chart",
					o.GetName(), describe(cl, RefOf(o)))
			case err != nil:
				return classify(cl, err, "get", RefOf(o))
			case ownedBy(existing, opts):
				continue
			}
			return fault.Permanentf("helm hook %s would replace %s, which belongs to %s: Helm deletes an existing object named like a hook before creating the hook, and devloop does not let a chart delete what this environment did not create; rename the hook in the chart, or delete the object",
				o.GetName(), describe(cl, RefOf(o)), ownerOf(existing))
		}
		return nil
	}
}

// existingHook reads, as the tenant (cl), the object standing where hook h
// would be created: h placed (a copy) and the object with its name, or
// o == nil when the hook cannot exist yet (hookPlaced).
func existingHook(ctx context.Context, cl client.Client, mapper meta.RESTMapper, namespace string, h *unstructured.Unstructured) (o, existing *unstructured.Unstructured, err error) {
	o = h.DeepCopy()
	if !hookPlaced(o, namespace, mapper) {
		return nil, nil, nil
	}
	existing = &unstructured.Unstructured{}
	existing.SetGroupVersionKind(o.GroupVersionKind())
	return o, existing, cl.Get(ctx, client.ObjectKeyFromObject(o), existing)
}

// hookPlaced gives a hook object the namespace Helm creates it in (the
// release's, when it names none and its kind is namespaced), and says
// whether it can exist already. A kind the cluster does not serve (the
// manager's mapper discovers again on a miss) has no object to replace;
// Helm's create of it fails and says so.
func hookPlaced(o *unstructured.Unstructured, namespace string, mapper meta.RESTMapper) bool {
	namespaced := true
	if mapper != nil {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return false
		}
		namespaced = m.Scope.Name() == meta.RESTScopeNameNamespace
	}
	if !namespaced {
		o.SetNamespace("")
	} else if o.GetNamespace() == "" {
		o.SetNamespace(namespace)
	}
	return true
}

// hookRemover deletes, as the tenant (cl), the hook objects of a release
// being uninstalled that this environment owns and that are still there:
// a completed hook Job kept by before-hook-creation, or one left running
// by an action that was stopped. Its pods go with it (background
// propagation). An object someone else owns (the hook check refused to
// replace it) is left.
func hookRemover(cl client.Client, mapper meta.RESTMapper, namespace string, opts ApplyOptions) helm.HookFunc {
	return func(ctx context.Context, hooks []*unstructured.Unstructured) error {
		for _, h := range hooks {
			o, existing, err := existingHook(ctx, cl, mapper, namespace, h)
			switch {
			case o == nil, apierrors.IsNotFound(err):
				continue
			case err != nil:
				return classify(cl, err, "get", RefOf(o))
			case !ownedBy(existing, opts) || existing.GetDeletionTimestamp() != nil:
				continue
			}
			err = cl.Delete(ctx, existing, client.PropagationPolicy(metav1.DeletePropagationBackground),
				client.Preconditions{UID: ptr(existing.GetUID())})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return classify(cl, err, "delete", RefOf(o))
			}
		}
		return nil
	}
}

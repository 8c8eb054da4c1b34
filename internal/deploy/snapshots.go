package deploy

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// A no-op reconcile reads every object its components deployed, for
// readiness and to see whether anything changed (applied.go): a GET each,
// twenty for ten components of a ConfigMap and a Deployment. Every object
// devloop deploys carries the environment's label, so one LIST per
// namespace and kind, made once per reconcile, reads them all. Snapshots
// serve only those reads of unchanged components: whatever is applied
// during the reconcile is read directly after. An object not in the list
// (not labelled, or gone) and a kind the ServiceAccount may not list are
// read with a GET, as before.

type snapshotsKey struct{}

// WithObjectSnapshots gives a reconcile's context the snapshots its
// components' unchanged objects are read from; without it every object is
// read with a GET.
func WithObjectSnapshots(ctx context.Context) context.Context {
	return context.WithValue(ctx, snapshotsKey{}, &objectSnapshots{lists: map[listKey]*listed{}})
}

type objectSnapshots struct {
	mu    sync.Mutex
	lists map[listKey]*listed
}

type listKey struct {
	namespace, environment string
	gvk                    schema.GroupVersionKind
}

// listed is one LIST's objects by name; none when the LIST failed.
type listed struct {
	objects map[string]*unstructured.Unstructured
}

// snapshotReader reads the objects an environment labelled from its
// reconcile's snapshots, and anything else from its client.
type snapshotReader struct {
	client.Client
	snapshots   *objectSnapshots
	environment string
}

// snapshotted is cl reading through the context's snapshots, if any.
func snapshotted(ctx context.Context, cl client.Client, environment string) client.Client {
	s, ok := ctx.Value(snapshotsKey{}).(*objectSnapshots)
	if !ok {
		return cl
	}
	return &snapshotReader{Client: cl, snapshots: s, environment: environment}
}

func (r *snapshotReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || len(opts) > 0 {
		return r.Client.Get(ctx, key, obj, opts...)
	}
	l := r.snapshots.list(ctx, r.Client, listKey{namespace: key.Namespace, environment: r.environment, gvk: u.GroupVersionKind()})
	if o := l.objects[key.Name]; o != nil {
		o.DeepCopyInto(u)
		return nil
	}
	return r.Client.Get(ctx, key, obj)
}

// list is the snapshot of k, listed on first use.
func (s *objectSnapshots) list(ctx context.Context, cl client.Reader, k listKey) *listed {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.lists[k]; l != nil {
		return l
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(k.gvk.GroupVersion().WithKind(k.gvk.Kind + "List"))
	opts := []client.ListOption{client.MatchingLabels{v1alpha1.LabelEnvironment: k.environment}}
	if k.namespace != "" {
		opts = append(opts, client.InNamespace(k.namespace))
	}
	l := &listed{objects: map[string]*unstructured.Unstructured{}}
	if err := cl.List(ctx, list, opts...); err != nil {
		// Forbidden (a ServiceAccount may get what it may not list), or
		// anything else: the GETs say what they say.
		list.Items = nil
	}
	for i := range list.Items {
		o := &list.Items[i]
		l.objects[o.GetName()] = o
	}
	s.lists[k] = l
	return l
}

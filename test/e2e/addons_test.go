//go:build e2e

package e2e

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/devloop-dev/devloop/internal/devcluster"
)

// clusterAddon is a part of the cluster only some tests need (Flux, OLM
// v1): installed once, by the first test that needs it, so the other
// tests never pay for it; <skipVar>=skip skips the tests that need it.
type clusterAddon[T any] struct {
	name    string
	skipVar string
	install func(ctx context.Context, c *devcluster.Cluster) (T, error)

	once      sync.Once
	installed T
	err       error
	took      time.Duration
}

// need is need(t) plus the addon running; it returns the addon and how
// long its installation took.
func (a *clusterAddon[T]) need(t *testing.T) (T, time.Duration) {
	t.Helper()
	c := need(t)
	if os.Getenv(a.skipVar) == "skip" {
		t.Skip(a.skipVar + "=skip")
	}
	a.once.Do(func() {
		start := time.Now()
		a.installed, a.err = a.install(context.Background(), c)
		a.took = time.Since(start)
	})
	if a.err != nil {
		t.Fatalf("installing %s: %v", a.name, a.err)
	}
	return a.installed, a.took
}

// unstructuredObject names an object of an API whose Go types the suite
// does not import (Flux's, OLM's): namespace "" for a cluster-scoped one.
func unstructuredObject(gvk schema.GroupVersionKind, ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

package testenv

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Namespace creates a namespace of its own for one test, named prefix
// plus a suffix the API server picks, and returns its name. envtest runs
// no namespace controller, so it is not deleted: names never collide.
func Namespace(t testing.TB, k8s client.Client, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating a namespace %s...: %v", prefix, err)
	}
	return ns.Name
}

package deploy

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func configMap(ns, name string, data map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"namespace": ns, "name": name},
		"data":     data,
	}}
}

func applyManagers(g Gomega, ns, name string) []string {
	cm := &corev1.ConfigMap{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cm)).To(Succeed())
	var managers []string
	for _, e := range cm.ManagedFields {
		if e.Operation == metav1.ManagedFieldsOperationApply {
			managers = append(managers, e.Manager)
		}
	}
	return managers
}

// TestFieldManagerPerEnvironment: two environments applying same-named
// objects in two namespaces write under their own managers, never the
// shared one.
func TestFieldManagerPerEnvironment(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	for _, ns := range []string{"fm-a", "fm-b"} {
		createNamespace(t, ns)
		opts := ApplyOptions{Environment: "shop", Component: "web", Owner: ns + "/shop"}
		_, err := Apply(ctx, k8s, []*unstructured.Unstructured{configMap(ns, "settings", map[string]any{"a": "1"})}, opts)
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(applyManagers(g, "fm-a", "settings")).To(Equal([]string{"devloop/fm-a/shop"}))
	g.Expect(applyManagers(g, "fm-b", "settings")).To(Equal([]string{"devloop/fm-b/shop"}))

	long := FieldManagerFor(strings.Repeat("n", 63) + "/" + strings.Repeat("e", 253))
	g.Expect(len(long)).To(BeNumerically("<=", 128))
	g.Expect(long).NotTo(Equal(FieldManagerFor(strings.Repeat("n", 63) + "/" + strings.Repeat("e", 252))))
}

// TestLegacyFieldManagerMigrates: an object an environment applied under
// the manager all environments shared before is left with the
// environment's own manager only, and a field its manifest no longer sets
// is removed as server-side apply promises (the legacy entry's fields
// moved to the new manager, not dropped).
func TestLegacyFieldManagerMigrates(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	createNamespace(t, "fm-legacy")
	opts := ApplyOptions{Environment: "shop", Component: "web", Owner: "fm-legacy/shop"}
	old := configMap("fm-legacy", "settings", map[string]any{"a": "1", "b": "2"})
	setOwnerLabels(old, opts)
	g.Expect(k8s.Apply(ctx, client.ApplyConfigurationFromUnstructured(old), client.FieldOwner(FieldManager), client.ForceOwnership)).To(Succeed())
	g.Expect(applyManagers(g, "fm-legacy", "settings")).To(Equal([]string{FieldManager}))

	// The upgraded operator applies the same object without b.
	_, err := Apply(ctx, k8s, []*unstructured.Unstructured{configMap("fm-legacy", "settings", map[string]any{"a": "1"})}, opts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(applyManagers(g, "fm-legacy", "settings")).To(Equal([]string{"devloop/fm-legacy/shop"}))

	// The next apply owns b alone and so removes it.
	_, err = Apply(ctx, k8s, []*unstructured.Unstructured{configMap("fm-legacy", "settings", map[string]any{"a": "1"})}, opts)
	g.Expect(err).NotTo(HaveOccurred())
	cm := &corev1.ConfigMap{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "fm-legacy", Name: "settings"}, cm)).To(Succeed())
	g.Expect(cm.Data).To(Equal(map[string]string{"a": "1"}))
	g.Expect(applyManagers(g, "fm-legacy", "settings")).To(Equal([]string{"devloop/fm-legacy/shop"}))
}

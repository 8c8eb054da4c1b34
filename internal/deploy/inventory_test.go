package deploy

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

var (
	cmA    = ObjRef{Version: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "a"}
	cmB    = ObjRef{Version: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "b"}
	deploy = ObjRef{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "ns", Name: "a"}
)

func TestDiff(t *testing.T) {
	upgraded := deploy
	upgraded.Version = "v2"
	cases := []struct {
		name     string
		old, new []ObjRef
		stale    []ObjRef
	}{
		{"first apply prunes nothing", nil, []ObjRef{cmA}, nil},
		{"removed object is stale", []ObjRef{cmA, cmB, deploy}, []ObjRef{cmA, deploy}, []ObjRef{cmB}},
		{"same name, other kind is another object", []ObjRef{cmA}, []ObjRef{deploy}, []ObjRef{cmA}},
		{"a new version is the same object", []ObjRef{deploy}, []ObjRef{upgraded}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(Diff(Inventory{Entries: tc.old}, Inventory{Entries: tc.new})).To(Equal(tc.stale))
		})
	}
}

func TestInventoryEncodeAndUnion(t *testing.T) {
	g := NewWithT(t)
	inv := Union(Inventory{Entries: []ObjRef{deploy, cmB}}, Inventory{Entries: []ObjRef{cmA, cmB}})
	g.Expect(inv.Entries).To(Equal([]ObjRef{cmA, cmB, deploy}))
	s, err := inv.Encode()
	g.Expect(err).NotTo(HaveOccurred())
	back, err := DecodeInventory(s)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(back).To(Equal(inv))
	g.Expect(cmA.String()).To(Equal("ns/ConfigMap/a"))
	g.Expect(deploy.String()).To(Equal("ns/Deployment.apps/a"))
}

// copyDir copies a flat directory.
func copyDir(t *testing.T, from string) string {
	t.Helper()
	to := t.TempDir()
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return to
}

func TestPruneRemovedFiles(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	dir := copyDir(t, filepath.Join(testdata, "kustomize", "base"))
	g.Expect(os.WriteFile(filepath.Join(dir, "ns.yaml"), []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: pruned}\n"), 0o644)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(dir, "kept.yaml"), []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: pre-existing}\n"), 0o644)).To(Succeed())
	g.Expect(os.Remove(filepath.Join(dir, "kustomization.yaml"))).To(Succeed()) // a plain directory now
	createNamespace(t, "pre-existing")
	opts := ApplyOptions{Environment: "prune-env", Component: "api"}

	render := func() []*unstructured.Unstructured {
		objs, err := Render(dir, nil, "pruned", k8s.RESTMapper())
		g.Expect(err).NotTo(HaveOccurred())
		return objs
	}
	first, err := Apply(ctx, k8s, render(), opts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(first.Entries).To(HaveLen(3))
	pre := &corev1.Namespace{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: "pre-existing"}, pre)).To(Succeed())
	g.Expect(pre.Labels).NotTo(HaveKey(v1alpha1.LabelEnvironment), "a namespace devloop did not create is not labelled as its own")

	// Every file is removed but an unrelated one: all the component had goes.
	for _, f := range []string{"deployment.yaml", "ns.yaml", "kept.yaml"} {
		g.Expect(os.Remove(filepath.Join(dir, f))).To(Succeed())
	}
	g.Expect(os.WriteFile(filepath.Join(dir, "cm.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: left, namespace: pre-existing}\n"), 0o644)).To(Succeed())
	second, err := Apply(ctx, k8s, render(), opts)
	g.Expect(err).NotTo(HaveOccurred())
	stale := Diff(first, second)
	g.Expect(stale).To(HaveLen(3))

	deleted, err := Prune(ctx, k8s, opts, stale)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(deleted).To(Equal([]ObjRef{
		{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "pruned", Name: "api"},
		{Version: "v1", Kind: "Namespace", Name: "pruned"},
	}), "the deployment first, its namespace last, never the pre-existing namespace")

	err = k8s.Get(ctx, client.ObjectKey{Namespace: "pruned", Name: "api"}, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment"}})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	// envtest runs no namespace controller: a deleted namespace stays Terminating.
	ns := &corev1.Namespace{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: "pruned"}, ns)).To(Succeed())
	g.Expect(ns.DeletionTimestamp).NotTo(BeNil())
	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: "pre-existing"}, pre)).To(Succeed())
	g.Expect(pre.DeletionTimestamp).To(BeNil())

	// Pruning again finds nothing to do; kstatus sees the rest as it is.
	deleted, err = Prune(ctx, k8s, opts, stale)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(deleted).To(BeEmpty())
	g.Expect(kstatusOf(g, ObjRef{Version: "v1", Kind: "Namespace", Name: "pruned"})).To(BeEquivalentTo("Terminating"))
	g.Expect(kstatusOf(g, second.Entries[0])).To(BeEquivalentTo("Current"))
}

func TestPruneSkipsOtherEnvironments(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	createNamespace(t, "other-env")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "other-env", Name: "theirs", Labels: map[string]string{v1alpha1.LabelEnvironment: "someone-else"}}}
	g.Expect(k8s.Create(ctx, cm)).To(Succeed())
	deleted, err := Prune(ctx, k8s, ApplyOptions{Environment: "prune-env"}, []ObjRef{
		{Version: "v1", Kind: "ConfigMap", Namespace: "other-env", Name: "theirs"},
		{Version: "v1", Kind: "ConfigMap", Namespace: "other-env", Name: "gone-already"},
		{Group: "gone.dev", Version: "v1", Kind: "Thing", Namespace: "other-env", Name: "crd-removed"},
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(deleted).To(BeEmpty())
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
}

package deploy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/devloop-dev/devloop/internal/fault"
)

const testdata = "testdata/manifests"

// byRef indexes rendered objects by their String form.
func byRef(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	m := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		m[RefOf(o).String()] = o
	}
	return m
}

func TestRenderPlainDirectory(t *testing.T) {
	g := NewWithT(t)
	objs, err := Render(testdata, []string{"plain"}, "shop", k8s.RESTMapper())
	g.Expect(err).NotTo(HaveOccurred())
	refs := byRef(objs)
	g.Expect(refs).To(HaveLen(6))
	g.Expect(refs).To(HaveKey("Namespace/shop"))
	g.Expect(refs).To(HaveKey("CustomResourceDefinition.apiextensions.k8s.io/widgets.example.dev"))
	g.Expect(refs).To(HaveKey("shop/ConfigMap/web-config"), "a namespaced object without namespace gets the default")
	g.Expect(refs).To(HaveKey("shop/ConfigMap/web-flags"))
	g.Expect(refs).To(HaveKey("shop/Deployment.apps/web"))
	g.Expect(refs).To(HaveKey("shop/Widget.example.dev/big"), "a kind defined by a CRD of the set is known")
	// Files in name order, documents in file order.
	g.Expect(objs[0].GetKind()).To(Equal("Namespace"))
	g.Expect(objs[len(objs)-1].GetKind()).To(Equal("Widget"))
}

func TestRenderSingleFileAndRoot(t *testing.T) {
	g := NewWithT(t)
	objs, err := Render(filepath.Join(testdata, "plain"), []string{"deployment.yaml"}, "shop", k8s.RESTMapper())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(objs).To(HaveLen(1))

	objs, err = Render(filepath.Join(testdata, "kustomize", "base"), nil, "shop", k8s.RESTMapper())
	g.Expect(err).NotTo(HaveOccurred(), "no paths is the root, here a kustomization")
	g.Expect(objs).To(HaveLen(1))
}

func TestRenderKustomizeOverlay(t *testing.T) {
	g := NewWithT(t)
	objs, err := Render(testdata, []string{"kustomize/overlay"}, "team-a", k8s.RESTMapper())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(objs).To(HaveLen(1))
	d := objs[0]
	g.Expect(d.GetNamespace()).To(Equal("team-a"))
	g.Expect(d.GetLabels()).To(HaveKeyWithValue("tier", "backend"))
	replicas, _, _ := unstructured.NestedInt64(d.Object, "spec", "replicas")
	g.Expect(replicas).To(BeEquivalentTo(3))

	// Images are rewritten after kustomize, on what it produced.
	n, err := RewriteImages(objs, []BuiltImage{builtAPI})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(1))
	g.Expect(imagesAt(t, d, containersOf("spec", "template", "spec"))).To(Equal([]string{apiDigest}))
}

func TestRenderRefuses(t *testing.T) {
	scratch := t.TempDir()
	write := func(name, content string) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(scratch, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(scratch, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("broken.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\nkind: [oops\n")
	write("noname.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {generateName: a-}\n")
	write("unknown.yaml", "apiVersion: nowhere.dev/v1\nkind: Gadget\nmetadata: {name: g}\n")
	write("twice/a.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: same}\n")
	write("twice/b.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: same}\n")
	write("symlinked/kustomization.yaml", "resources: [link.yaml]\n")
	if err := os.Symlink("/etc/hostname", filepath.Join(scratch, "symlinked", "link.yaml")); err != nil {
		t.Fatal(err)
	}
	write("httpfile/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n")
	write("httpfile/kustomization.yaml", "resources: [cm.yaml]\npatches:\n- path: https://example.com/patch.yaml\n")
	// Every field that names a patch file, pointed at a server that
	// counts requests: none may reach it.
	var fetched atomic.Int32
	patchServer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetched.Add(1)
		_, _ = io.WriteString(w, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {x: y}\n")
	}))
	defer patchServer.Close()
	write("smpurl/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n")
	write("smpurl/kustomization.yaml", "resources: [cm.yaml]\npatchesStrategicMerge:\n- "+patchServer.URL+"/smp.yaml\n")
	write("jsonurl/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n")
	write("jsonurl/kustomization.yaml", "resources: [cm.yaml]\npatchesJson6902:\n- target: {version: v1, kind: ConfigMap, name: cm}\n  path: "+patchServer.URL+"/json.yaml\n")
	defer func() {
		if n := fetched.Load(); n != 0 {
			t.Errorf("kustomize fetched %d patch files from the network", n)
		}
	}()

	cases := []struct {
		name, dir, path, want string
	}{
		{"kustomization escaping the source", filepath.Join(testdata, "escape"), "overlay", `resource "../../outside" leaves the source`},
		{"remote base", testdata, "remote", `remote resource "https://github.com/kubernetes-sigs/kustomize//examples/helloWorld?ref=v3.3.1" is not allowed`},
		{"remote patch file", scratch, "httpfile", `remote file "https://example.com/patch.yaml" is not allowed`},
		{"remote patchesStrategicMerge file", scratch, "smpurl", `remote file "` + patchServer.URL + `/smp.yaml" is not allowed`},
		{"remote patchesJson6902 file", scratch, "jsonurl", `remote file "` + patchServer.URL + `/json.yaml" is not allowed`},
		{"symlink out of the source", scratch, "symlinked", "leaves the source"},
		{"path escaping the source", filepath.Join(testdata, "plain"), "../outside", "manifests path ../outside: leaves the source"},
		{"missing path", testdata, "nope", "manifests path nope: not found in the source"},
		{"invalid YAML names file and document", scratch, "broken.yaml", "broken.yaml: document 2:"},
		{"no name", scratch, "noname.yaml", "noname.yaml: document 1: ConfigMap has no metadata.name"},
		{"unknown kind", scratch, "unknown.yaml", "Gadget g: the cluster does not serve nowhere.dev/v1"},
		{"same object twice", scratch, "twice", "ConfigMap/same is defined twice"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := Render(tc.dir, []string{tc.path}, "default", k8s.RESTMapper())
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
			g.Expect(fault.IsPermanent(err)).To(BeTrue(), "%v", err)
		})
	}
}

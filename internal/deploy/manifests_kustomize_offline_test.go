package deploy

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
)

// TestKustomizeLoaderIsOffline: the loader devloop gives kustomize, with
// the check on the kustomization bypassed, makes no request for any field
// that names a URL — patchesStrategicMerge, resources, patchesJson6902,
// patches, a git base, and a builtin transformer's config file that no
// check of the kustomization reads — to a server that counts them.
func TestKustomizeLoaderIsOffline(t *testing.T) {
	var fetched atomic.Int32
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetched.Add(1)
		_, _ = io.WriteString(w, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {x: y}\n")
	}))
	defer server.Close()
	root := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const cm = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n"
	cases := map[string]string{
		"smp":          "resources: [cm.yaml]\npatchesStrategicMerge:\n- " + server.URL + "/smp.yaml\n",
		"resources":    "resources:\n- " + server.URL + "/cm.yaml\n",
		"json6902":     "resources: [cm.yaml]\npatchesJson6902:\n- target: {version: v1, kind: ConfigMap, name: cm}\n  path: " + server.URL + "/json.yaml\n",
		"patches":      "resources: [cm.yaml]\npatches:\n- path: " + server.URL + "/patch.yaml\n",
		"gitbase":      "resources:\n- " + server.URL + "/org/repo.git//base?ref=main\n",
		"transformers": "resources: [cm.yaml]\ntransformers: [patch.yaml]\n",
	}
	for name, kustomization := range cases {
		write(name+"/cm.yaml", cm)
		write(name+"/kustomization.yaml", kustomization)
	}
	write("transformers/patch.yaml", "apiVersion: builtin\nkind: PatchTransformer\nmetadata: {name: p}\npath: "+server.URL+"/transformer.yaml\ntarget: {kind: ConfigMap}\n")
	for name := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := kustomizeOffline(context.Background(), root, filepath.Join(root, name), nil)
			g.Expect(err).To(HaveOccurred())
			g.Expect(fetched.Load()).To(BeZero(), "requests reached the server: %v", err)
		})
	}

	// What needs no network builds as before.
	write("local/cm.yaml", cm)
	write("local/kustomization.yaml", "resources: [cm.yaml]\nnamePrefix: x-\n")
	g := NewWithT(t)
	objs, err := kustomizeOffline(context.Background(), root, filepath.Join(root, "local"), nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(objs).To(HaveLen(1))
	g.Expect(objs[0].GetName()).To(Equal("x-cm"))
}

// TestBuildCacheBounds: the cache of builds keeps at most its entries and
// bytes, dropping the oldest.
func TestBuildCacheBounds(t *testing.T) {
	c := &buildCache{maxEntries: 2, maxBytes: 100}
	c.put("r", "a", make([]byte, 10))
	c.put("r", "b", make([]byte, 10))
	c.put("r", "c", make([]byte, 10))
	if _, ok := c.get("r", "a"); ok {
		t.Error("a outlived the entry bound")
	}
	c.put("r", "d", make([]byte, 20))
	c.put("r", "e", make([]byte, 26)) // over a quarter of the bytes: not kept
	if _, ok := c.get("r", "e"); ok {
		t.Error("an output over a quarter of the bound was kept")
	}
	for _, k := range []string{"c", "d"} {
		if _, ok := c.get("r", k); !ok {
			t.Errorf("%s dropped", k)
		}
	}
	if c.bytes != 30 || len(c.keys) != 2 {
		t.Errorf("bytes %d, entries %d; want 30, 2", c.bytes, len(c.keys))
	}
}

// Two deploy engines in one process (two operators) remember their own
// kustomize builds: one's build is not served to the other.
func TestKustomizeBuildsAreTheEnginesOwn(t *testing.T) {
	g := NewWithT(t)
	a, b := &Engine{Mapper: k8s.RESTMapper()}, &Engine{Mapper: k8s.RESTMapper()}
	root, err := filepath.Abs(testdata)
	g.Expect(err).NotTo(HaveOccurred())
	root, err = filepath.EvalSymlinks(root)
	g.Expect(err).NotTo(HaveOccurred())
	dir := filepath.Join(root, "kustomize", "base")
	objs, err := a.renderManifests(testdata, []string{"kustomize/base"}, "shop")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(objs).NotTo(BeEmpty())
	_, ok := a.kustomizeBuilds().get(root, dir)
	g.Expect(ok).To(BeTrue(), "a remembers its build")
	_, ok = b.kustomizeBuilds().get(root, dir)
	g.Expect(ok).To(BeFalse(), "a's build is served to b")
}

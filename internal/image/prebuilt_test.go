package image

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/source"
	"github.com/devloop-dev/devloop/internal/testfiles"
	"github.com/devloop-dev/devloop/internal/testregistry"
)

// pushAndFetch packs dir as a push does (the layers of images prebuilt),
// pushes it to host/team/src:dev and fetches it back through the source
// store, as the operator does.
func pushAndFetch(t *testing.T, host, dir string, images []v1alpha1.ImageSpec, exclude source.ExcludeFunc) *source.Artifact {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	mapped, err := PrebuildLayers(dir, images, exclude)
	g.Expect(err).NotTo(HaveOccurred())
	img, err := source.PackDir(dir, exclude, source.CompressionNone, mapped...)
	g.Expect(err).NotTo(HaveOccurred())
	repo := host + "/team/src"
	g.Expect(source.PushArtifact(ctx, img, repo+":dev", source.PushOptions{Insecure: true})).To(Succeed())
	f := &source.Fetcher{Root: t.TempDir()}
	ref, err := f.Resolve(ctx, "ns", v1alpha1.Source{Name: "app", OCI: &v1alpha1.OCISource{Repository: repo, Tag: "dev", Insecure: true}})
	g.Expect(err).NotTo(HaveOccurred())
	a, err := f.Fetch(ctx, ref, nil)
	g.Expect(err).NotTo(HaveOccurred())
	return a
}

// TestPrebuiltLayerIsMountedNotUploaded: a pushed binary travels to the
// registry once. The operator's build finds its layer byte for byte in
// the source, mounts it from the source's repository instead of uploading
// it, and the image is the very one it builds without that help.
func TestPrebuiltLayerIsMountedNotUploaded(t *testing.T) {
	g := NewWithT(t)
	host := testregistry.Start(t)
	ctx := context.Background()
	dir := testfiles.Tree(t, map[string]string{
		"bin/web":           string(randomBytes(7, 1<<20)),
		"chart/Chart.yaml":  "name: web",
		"static/index.html": "<p>hi</p>",
	})
	img := Spec{Name: "web", Entrypoint: []string{"/web"}, Layers: []v1alpha1.LayerMapping{
		{From: "bin/web", To: "/web", Mode: "0755"},
		{From: "static", To: "/srv/www/"},
	}}
	a := pushAndFetch(t, host, dir, []v1alpha1.ImageSpec{{Name: "web", Layers: img.Layers}}, nil)

	// The store put the files back where they were, and kept the blobs.
	for p, want := range map[string]string{"chart/Chart.yaml": "name: web", "static/index.html": "<p>hi</p>"} {
		got, err := os.ReadFile(filepath.Join(a.Dir, p))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(got)).To(Equal(want))
	}
	bin, err := os.ReadFile(filepath.Join(a.Dir, "bin/web"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(bin).To(Equal(randomBytes(7, 1<<20)))
	g.Expect(a.Prebuilt).To(ConsistOf(
		And(HaveField("From", "bin/web"), HaveField("To", "web")),
		And(HaveField("From", "static"), HaveField("To", "srv/www")),
	))

	b, rt := testBuilder(t, host)
	helped := img
	helped.Prebuilt, helped.SourceRepository = a.Prebuilt, host+"/team/src"
	res, err := b.Build(ctx, helped, a.Dir, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Uploaded).To(Equal(1), "the config only: both layers are mounted")
	reqs := rt.take()
	g.Expect(blobUploads(reqs)).To(ContainElement(HaveField("Query", ContainSubstring("from=team%2Fsrc"))))

	// Built again without the prebuilt blobs (into another repository):
	// the same image, its layers uploaded.
	alone := img
	alone.Name = "web-alone"
	plain, err := b.Build(ctx, alone, a.Dir, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(plain.Digest).To(Equal(res.Digest))
	g.Expect(plain.Uploaded).To(Equal(3))

	pulled := testregistry.Pull(t, res.Repository+"@"+res.Digest)
	layers, err := pulled.Layers()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(readLayer(t, layers[0])).To(ContainElement(And(HaveField("Name", "web"), HaveField("Mode", int64(0o755)))))
}

// TestPrebuiltLayerThatDiffersIsBuilt: a mapped layer that is not what the
// build would write (another version's push, a hand-made artifact) is
// ignored, whatever its annotations claim: the build writes its own.
func TestPrebuiltLayerThatDiffersIsBuilt(t *testing.T) {
	g := NewWithT(t)
	host := testregistry.Start(t)
	dir := testfiles.Tree(t, map[string]string{"bin/web": "v1"})
	mapping := v1alpha1.LayerMapping{From: "bin/web", To: "/web", Mode: "0755"}
	// Pushed for mode 0700; the image asks 0755.
	other := mapping
	other.Mode = "0700"
	a := pushAndFetch(t, host, dir, []v1alpha1.ImageSpec{{Name: "web", Layers: []v1alpha1.LayerMapping{other}}}, nil)
	g.Expect(a.Prebuilt).To(HaveLen(1))

	b, _ := testBuilder(t, host)
	img := Spec{Name: "web", Layers: []v1alpha1.LayerMapping{mapping}, Prebuilt: a.Prebuilt, SourceRepository: host + "/team/src"}
	res, err := b.Build(context.Background(), img, a.Dir, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Uploaded).To(Equal(2), "its own layer and the config")
	layers, err := testregistry.Pull(t, res.Repository+"@"+res.Digest).Layers()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(readLayer(t, layers[0])).To(ContainElement(HaveField("Mode", int64(0o755))))

	// A blob the store lost is no error either.
	g.Expect(os.Remove(a.Prebuilt[0].File)).To(Succeed())
	img.Name = "web-again"
	_, err = b.Build(context.Background(), img, a.Dir, nil)
	g.Expect(err).NotTo(HaveOccurred())
}

// TestPrebuildLeavesSomeMappingsToTheOperator: only files that the store
// can put back exactly as pushed are prebuilt.
func TestPrebuildLeavesSomeMappingsToTheOperator(t *testing.T) {
	dir := testfiles.Tree(t, map[string]string{"bin/web": "w", "bin/tool": "t", "real/x": "x", "logs/a.log": "l", "conf/a": "a"})
	if err := os.Symlink("real", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	exclude := func(rel string, isDir bool) bool { return rel == "logs/a.log" }
	for _, tc := range []struct {
		name     string
		mappings []v1alpha1.LayerMapping
		want     []string // From of the prebuilt layers
	}{
		{"a file and a directory", []v1alpha1.LayerMapping{{From: "bin/web", To: "/web"}, {From: "conf", To: "/etc/app"}}, []string{"bin/web", "conf"}},
		{"through a symlink", []v1alpha1.LayerMapping{{From: "link/x", To: "/x"}}, nil},
		{"with an excluded file", []v1alpha1.LayerMapping{{From: "logs", To: "/logs"}}, nil},
		{"the same mapping twice", []v1alpha1.LayerMapping{{From: "bin/web", To: "/web"}, {From: "bin/web", To: "/web"}}, []string{"bin/web"}},
		{"one path to two places", []v1alpha1.LayerMapping{{From: "bin/web", To: "/web"}, {From: "bin/web", To: "/usr/bin/web"}}, nil},
		{"nested paths", []v1alpha1.LayerMapping{{From: "bin", To: "/bin"}, {From: "bin/web", To: "/web"}, {From: "conf", To: "/etc/app"}}, []string{"conf"}},
		{"a missing path", []v1alpha1.LayerMapping{{From: "nope", To: "/nope"}}, nil},
		{"the whole source", []v1alpha1.LayerMapping{{From: ".", To: "/app"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			mapped, err := PrebuildLayers(dir, []v1alpha1.ImageSpec{{Name: "web", Layers: tc.mappings}}, exclude)
			g.Expect(err).NotTo(HaveOccurred())
			var got []string
			for _, m := range mapped {
				got = append(got, m.From)
			}
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

// TestAPrebuiltLayerIsReadFromItsBlob: a layer found the same as the
// source's prebuilt blob is read from that blob, not written again from
// the tree (a live update reads the changed layer on the path of the
// change, while the image is pushed beside it): the tree's file may even
// be gone. A blob the store lost meanwhile is written from the tree.
func TestAPrebuiltLayerIsReadFromItsBlob(t *testing.T) {
	g := NewWithT(t)
	host := testregistry.Start(t)
	dir := testfiles.Tree(t, map[string]string{"bin/web": string(randomBytes(11, 256<<10))})
	mapping := v1alpha1.LayerMapping{From: "bin/web", To: "/web", Mode: "0755"}
	a := pushAndFetch(t, host, dir, []v1alpha1.ImageSpec{{Name: "web", Layers: []v1alpha1.LayerMapping{mapping}}}, nil)
	g.Expect(a.Prebuilt).To(HaveLen(1))
	blob, err := os.ReadFile(a.Prebuilt[0].File)
	g.Expect(err).NotTo(HaveOccurred())

	b, _ := testBuilder(t, host)
	img := Spec{Name: "web", Layers: []v1alpha1.LayerMapping{mapping}, Prebuilt: a.Prebuilt, SourceRepository: host + "/team/src"}
	layers, err := b.sourceLayers(img, a.Dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(layers).To(HaveLen(1))

	tree, aside := filepath.Join(a.Dir, "bin/web"), filepath.Join(t.TempDir(), "web")
	g.Expect(os.Rename(tree, aside)).To(Succeed())
	read := func() []byte {
		rc, err := layers[0].Uncompressed()
		g.Expect(err).NotTo(HaveOccurred())
		defer rc.Close()
		got, err := io.ReadAll(rc)
		g.Expect(err).NotTo(HaveOccurred(), "the layer was written again from the tree")
		return got
	}
	g.Expect(read()).To(Equal(blob))

	// The store lost the blob: written from the tree, as it was.
	g.Expect(os.Rename(aside, tree)).To(Succeed())
	g.Expect(os.Remove(a.Prebuilt[0].File)).To(Succeed())
	g.Expect(read()).To(Equal(blob))
}

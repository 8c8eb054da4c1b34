package image

import (
	"archive/tar"
	"context"
	"net/http"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	. "github.com/onsi/gomega"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/source"
	"github.com/devloop-dev/devloop/internal/testfiles"
	"github.com/devloop-dev/devloop/internal/testregistry"
)

// testBuilder returns a Builder for host/team whose requests rt records.
func testBuilder(t *testing.T, host string, opts ...Option) (*Builder, *recordingTransport) {
	t.Helper()
	rt := &recordingTransport{}
	b, err := NewBuilder(Registry{Prefix: host + "/team", Insecure: true}, append([]Option{WithTransport(rt), fastRetries()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return b, rt
}

func TestBuildPushesImageWithConfigAndTags(t *testing.T) {
	g := NewWithT(t)
	host := startRegistry(t, nil)
	base := pushBase(t, host, "base/static", "linux/amd64")
	b, _ := testBuilder(t, host)
	dir := testfiles.Tree(t, map[string]string{"out/manager": "binary", "conf/a.yaml": "a: 1"})

	img := Spec{
		Name:       "controller",
		Base:       base,
		Layers:     []v1alpha1.LayerMapping{{From: "out/manager", To: "/manager", Mode: "0755"}, {From: "conf", To: "/etc/app"}},
		Entrypoint: []string{"/manager"},
		Cmd:        []string{"--leader-elect"},
		Env:        []v1alpha1.EnvVar{{Name: "BASE", Value: "2"}, {Name: "MODE", Value: "dev"}},
		WorkingDir: "/work",
		User:       "65532:65532",
		SourceURL:  "https://git.example/app",
		Revision:   "0123456789abcdef",
	}
	var rendered string
	res, err := b.Build(context.Background(), img, dir, func(hash string) ([]string, error) {
		rendered = hash
		return []string{"0123456789ab", hash, "latest"}, nil
	})
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(res.Repository).To(Equal(host + "/team/controller"))
	g.Expect(res.Digest).To(Equal("sha256:" + res.ContentHash))
	g.Expect(res.ContentHash).To(MatchRegexp("^[0-9a-f]{64}$"))
	g.Expect(rendered).To(Equal(res.ContentHash))
	g.Expect(res.Tags).To(Equal([]string{res.ContentHash, "0123456789ab", "latest"}))
	g.Expect(res.Pushed).To(BeTrue())
	// Two layers and the config: the in-memory registry shares blobs between
	// repositories, so it has the base's layers already.
	g.Expect(res.Uploaded).To(Equal(3))
	for _, tag := range res.Tags {
		g.Expect(tagDigest(t, host, "team/controller", tag)).To(Equal(res.Digest), tag)
	}
	g.Expect(b.PullReference("controller", res.Digest)).To(Equal(host + "/team/controller@" + res.Digest))

	pulled := testregistry.Pull(t, res.Repository+"@"+res.Digest)
	cf, err := pulled.ConfigFile()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cf.Created.Unix()).To(BeZero())
	g.Expect(cf.OS + "/" + cf.Architecture).To(Equal("linux/amd64"))
	g.Expect(cf.Config.Entrypoint).To(Equal([]string{"/manager"}))
	g.Expect(cf.Config.Cmd).To(Equal([]string{"--leader-elect"}))
	g.Expect(cf.Config.Env).To(Equal([]string{"PATH=/usr/bin", "BASE=2", "MODE=dev"}))
	g.Expect(cf.Config.WorkingDir).To(Equal("/work"))
	g.Expect(cf.Config.User).To(Equal("65532:65532"))
	g.Expect(cf.Config.Labels).To(Equal(map[string]string{
		"org.opencontainers.image.source":   "https://git.example/app",
		"org.opencontainers.image.revision": "0123456789abcdef",
	}))
	g.Expect(cf.History).To(HaveLen(4))
	for _, h := range cf.History[2:] {
		g.Expect(h.Created.Unix()).To(BeZero())
		g.Expect(h.CreatedBy).To(HavePrefix("devloop: COPY "))
	}
	layers, err := pulled.Layers()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(layers).To(HaveLen(4))
	files := readLayer(t, layers[2])
	g.Expect(files).To(Equal([]tarEntry{{Name: "manager", Type: tar.TypeReg, Mode: 0o755, Content: "binary"}}))
}

func TestBuildEntrypointOnlyDropsBaseCmd(t *testing.T) {
	g := NewWithT(t)
	host := startRegistry(t, nil)
	base := pushBase(t, host, "base/static", "linux/amd64")
	b, _ := testBuilder(t, host)

	res, err := b.Build(context.Background(), Spec{Name: "a", Base: base, Entrypoint: []string{"/a"}}, "", nil)
	g.Expect(err).NotTo(HaveOccurred())
	cf, err := testregistry.Pull(t, res.Repository+"@"+res.Digest).ConfigFile()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cf.Config.Cmd).To(BeNil())

	res, err = b.Build(context.Background(), Spec{Name: "b", Base: base, Cmd: []string{"x"}}, "", nil)
	g.Expect(err).NotTo(HaveOccurred())
	cf, err = testregistry.Pull(t, res.Repository+"@"+res.Digest).ConfigFile()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cf.Config.Cmd).To(Equal([]string{"x"}))
}

// TestBuildPushesOnlyWhatChanged: a one-file change uploads one layer blob,
// the config and the manifest; nothing changed uploads and writes nothing.
func TestBuildPushesOnlyWhatChanged(t *testing.T) {
	g := NewWithT(t)
	host := startRegistry(t, nil)
	base := pushBase(t, host, "base/static", "linux/amd64")
	b, rt := testBuilder(t, host)
	dir := testfiles.Tree(t, map[string]string{
		"bin/app":         string(randomBytes(3, 1<<20)),
		"conf/app.yaml":   "replicas: 1",
		"conf/other.yaml": "x: y",
	})
	img := Spec{
		Name:   "app",
		Base:   base,
		Layers: []v1alpha1.LayerMapping{{From: "bin/app", To: "/app", Mode: "0755"}, {From: "conf", To: "/etc/app"}},
	}
	tags := staticTags("latest")

	first, err := b.Build(context.Background(), img, dir, tags)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(first.Pushed).To(BeTrue())
	rt.take()

	testfiles.WriteFile(t, dir, "conf/app.yaml", "replicas: 2")
	second, err := b.Build(context.Background(), img, dir, tags)
	g.Expect(err).NotTo(HaveOccurred())
	reqs := rt.take()
	g.Expect(second.Digest).NotTo(Equal(first.Digest))
	g.Expect(second.Pushed).To(BeTrue())
	g.Expect(second.Uploaded).To(Equal(2))

	pulled := testregistry.Pull(t, second.Repository+"@"+second.Digest)
	layers, err := pulled.Layers()
	g.Expect(err).NotTo(HaveOccurred())
	confLayer, err := layers[len(layers)-1].Digest()
	g.Expect(err).NotTo(HaveOccurred())
	config, err := pulled.ConfigName()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(uploadedDigests(reqs)).To(ConsistOf(confLayer.String(), config.String()))
	// One upload session (POST, PATCH, PUT) per uploaded blob, no more.
	g.Expect(blobUploads(reqs)).To(HaveLen(6), "%v", blobUploads(reqs))
	g.Expect(manifestPuts(reqs)).To(Equal([]string{second.Digest, second.ContentHash, "latest"}))

	third, err := b.Build(context.Background(), img, dir, tags)
	g.Expect(err).NotTo(HaveOccurred())
	reqs = rt.take()
	g.Expect(third.Digest).To(Equal(second.Digest))
	g.Expect(third.Pushed).To(BeFalse())
	g.Expect(third.Uploaded).To(BeZero())
	g.Expect(writes(reqs)).To(BeEmpty())
}

// manifestPuts lists the references of the manifest PUTs, in order.
func manifestPuts(reqs []request) []string {
	var out []string
	for _, r := range reqs {
		if r.Method == http.MethodPut {
			if _, ref, ok := strings.Cut(r.Path, "/manifests/"); ok {
				out = append(out, ref)
			}
		}
	}
	return out
}

func TestBuildMovesOnlyMissingTags(t *testing.T) {
	g := NewWithT(t)
	host := startRegistry(t, nil)
	b, rt := testBuilder(t, host)
	img := Spec{Name: "app", Entrypoint: []string{"/app"}}

	first, err := b.Build(context.Background(), img, "", staticTags("v1"))
	g.Expect(err).NotTo(HaveOccurred())
	rt.take()
	second, err := b.Build(context.Background(), img, "", staticTags("v1", "v2", first.ContentHash))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(second.Digest).To(Equal(first.Digest))
	g.Expect(second.Tags).To(Equal([]string{first.ContentHash, "v1", "v2"}))
	g.Expect(second.Pushed).To(BeTrue())
	g.Expect(manifestPuts(rt.take())).To(Equal([]string{"v2"}))
}

func TestBuildScratchSeveralPlatforms(t *testing.T) {
	g := NewWithT(t)
	host := startRegistry(t, nil)
	b, rt := testBuilder(t, host)
	dir := testfiles.Tree(t, map[string]string{"run.sh": "#!/bin/sh"})
	img := Spec{
		Name:      "tool",
		Platforms: []string{"linux/arm64", "linux/amd64"},
		Layers:    []v1alpha1.LayerMapping{{From: "run.sh", To: "/run.sh", Mode: "0755"}},
	}
	res, err := b.Build(context.Background(), img, dir, staticTags("dev"))
	g.Expect(err).NotTo(HaveOccurred())
	reqs := rt.take()

	idx := testregistry.PullIndex(t, res.Repository+"@"+res.Digest)
	im, err := idx.IndexManifest()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(im.MediaType).To(Equal(types.OCIImageIndex))
	g.Expect(im.Manifests).To(HaveLen(2))
	g.Expect(im.Manifests[0].Platform.String()).To(Equal("linux/amd64"))
	g.Expect(im.Manifests[1].Platform.String()).To(Equal("linux/arm64"))
	for _, m := range im.Manifests {
		child, err := idx.Image(m.Digest)
		g.Expect(err).NotTo(HaveOccurred())
		cf, err := child.ConfigFile()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cf.Platform().String()).To(Equal(m.Platform.String()))
	}
	// Images by digest, then the index by digest, then the tags.
	puts := manifestPuts(reqs)
	g.Expect(puts).To(HaveLen(5))
	g.Expect(puts[:2]).To(ConsistOf(im.Manifests[0].Digest.String(), im.Manifests[1].Digest.String()))
	g.Expect(puts[2:]).To(Equal([]string{res.Digest, res.ContentHash, "dev"}))
	// One shared layer, two configs.
	g.Expect(res.Uploaded).To(Equal(3))

	// The listing order of platforms does not change the content hash.
	img.Platforms = []string{"linux/amd64", "linux/arm64", "linux/amd64"}
	again, err := b.Build(context.Background(), img, dir, staticTags("dev"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.Digest).To(Equal(res.Digest))
	g.Expect(again.Pushed).To(BeFalse())
}

func TestBuildBasePerPlatform(t *testing.T) {
	g := NewWithT(t)
	host := startRegistry(t, nil)
	base := pushBase(t, host, "base/multi", "linux/amd64", "linux/arm64")
	b, _ := testBuilder(t, host)

	res, err := b.Build(context.Background(), Spec{Name: "app", Base: base, Platforms: []string{"linux/amd64", "linux/arm64"}}, "", nil)
	g.Expect(err).NotTo(HaveOccurred())
	baseIdx := testregistry.PullIndex(t, base)
	idx := testregistry.PullIndex(t, res.Repository+"@"+res.Digest)
	im, err := idx.IndexManifest()
	g.Expect(err).NotTo(HaveOccurred())
	for _, m := range im.Manifests {
		child, err := idx.Image(m.Digest)
		g.Expect(err).NotTo(HaveOccurred())
		want := baseImageFor(t, baseIdx, *m.Platform)
		gotLayers, err := child.Layers()
		g.Expect(err).NotTo(HaveOccurred())
		wantLayers, err := want.Layers()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(digests(t, gotLayers)).To(Equal(digests(t, wantLayers)), m.Platform.String())
	}

	// A single platform is a plain image on that platform's base.
	res, err = b.Build(context.Background(), Spec{Name: "app-arm", Base: base, Platforms: []string{"linux/arm64"}}, "", nil)
	g.Expect(err).NotTo(HaveOccurred())
	cf, err := testregistry.Pull(t, res.Repository+"@"+res.Digest).ConfigFile()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cf.Architecture).To(Equal("arm64"))
}

func baseImageFor(t *testing.T, idx v1.ImageIndex, p v1.Platform) v1.Image {
	t.Helper()
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range im.Manifests {
		if m.Platform.Satisfies(p) {
			img, err := idx.Image(m.Digest)
			if err != nil {
				t.Fatal(err)
			}
			return img
		}
	}
	t.Fatalf("no %s in base", p)
	return nil
}

func digests(t *testing.T, layers []v1.Layer) []string {
	t.Helper()
	var out []string
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, d.String())
	}
	return out
}

// TestAssemblePushPublish is the builder Job path: each platform assembled
// and pushed by digest without a tag, then published; it gives the index
// an in-process build of the same inputs gives.
func TestAssemblePushPublish(t *testing.T) {
	g := NewWithT(t)
	host := startRegistry(t, nil)
	base := pushBase(t, host, "base/multi", "linux/amd64", "linux/arm64")
	b, rt := testBuilder(t, host)
	dir := testfiles.Tree(t, map[string]string{"out/manager": "binary"})
	img := Spec{
		Name:       "controller",
		Base:       base,
		Platforms:  []string{"linux/amd64", "linux/arm64"},
		Layers:     []v1alpha1.LayerMapping{{From: "out/manager", To: "/manager", Mode: "0755"}},
		Entrypoint: []string{"/manager"},
	}
	ctx := context.Background()

	pushed := map[string]v1.Hash{}
	uploaded := 0
	for _, p := range img.Platforms {
		image, err := b.Assemble(ctx, img, p, dir)
		g.Expect(err).NotTo(HaveOccurred())
		d, n, err := b.PushImage(ctx, img.Name, image)
		g.Expect(err).NotTo(HaveOccurred())
		uploaded += n
		pushed[p] = d
	}
	g.Expect(uploaded).To(Equal(3), "the shared layer once, two configs")
	reqs := rt.take()
	for _, ref := range manifestPuts(reqs) {
		g.Expect(ref).To(HavePrefix("sha256:"), "PushImage tags nothing")
	}

	res, err := b.Publish(ctx, img.Name, pushed, staticTags("dev"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Uploaded).To(BeZero())
	g.Expect(res.Tags).To(Equal([]string{res.ContentHash, "dev"}))
	g.Expect(manifestPuts(rt.take())).To(Equal([]string{res.Digest, res.ContentHash, "dev"}))

	inProcess, err := b.Build(ctx, img, dir, staticTags("dev"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(inProcess.Digest).To(Equal(res.Digest))
	g.Expect(inProcess.Pushed).To(BeFalse())

	// One platform: the image itself is tagged.
	single, err := b.Publish(ctx, img.Name, map[string]v1.Hash{"linux/arm64": pushed["linux/arm64"]}, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(single.Digest).To(Equal(pushed["linux/arm64"].String()))
	g.Expect(tagDigest(t, host, "team/controller", single.ContentHash)).To(Equal(single.Digest))
}

func TestAssembleAgainIsNotPushed(t *testing.T) {
	g := NewWithT(t)
	host := startRegistry(t, nil)
	b, rt := testBuilder(t, host)
	dir := testfiles.Tree(t, map[string]string{"a": "a"})
	img := Spec{Name: "a", Layers: []v1alpha1.LayerMapping{{From: "a", To: "/a"}}}

	image, err := b.Assemble(context.Background(), img, "", dir)
	g.Expect(err).NotTo(HaveOccurred())
	_, n, err := b.PushImage(context.Background(), "a", image)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(2))
	rt.take()
	_, n, err = b.PushImage(context.Background(), "a", image)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(BeZero())
	g.Expect(writes(rt.take())).To(BeEmpty())
}

func TestResolveBase(t *testing.T) {
	g := NewWithT(t)
	host := startRegistry(t, nil)
	base := pushBase(t, host, "base/static", "linux/amd64")
	b, rt := testBuilder(t, host)

	d, err := b.ResolveBase(context.Background(), base, false)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d).To(Equal(tagDigest(t, host, "base/static", "latest")))
	for _, r := range rt.take() {
		g.Expect(r.Method).To(Or(Equal(http.MethodHead), Equal(http.MethodGet)))
		if r.Method == http.MethodGet {
			g.Expect(r.Path).To(Equal("/v2/"), "only the ping is a GET")
		}
	}

	d, err = b.ResolveBase(context.Background(), "", false)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d).To(BeEmpty())
}

func TestRepositoryAndPullReference(t *testing.T) {
	tests := []struct {
		reg              Registry
		wantRepo, wantPR string
	}{
		{Registry{Prefix: "localhost:5000/team-a"}, "localhost:5000/team-a/app", "localhost:5000/team-a/app@sha256:x"},
		{Registry{Prefix: "localhost:5000/team-a/", PullPrefix: "localhost:5001/team-a/"}, "localhost:5000/team-a/app", "localhost:5001/team-a/app@sha256:x"},
	}
	for _, tc := range tests {
		g := NewWithT(t)
		b, err := NewBuilder(tc.reg)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(b.Repository("app")).To(Equal(tc.wantRepo))
		g.Expect(b.PullReference("app", "sha256:x")).To(Equal(tc.wantPR))
	}
}

// TestLayerCompressionFollowsTheRegistry: a registry on loopback gets the
// source layer as its plain tar (nothing to gzip on push or gunzip on
// pull), any other gzip; both read back as the same files.
func TestLayerCompressionFollowsTheRegistry(t *testing.T) {
	host := startRegistry(t, nil)
	dir := testfiles.Tree(t, map[string]string{"out/app": "binary"})
	img := Spec{Name: "app", Layers: []v1alpha1.LayerMapping{{From: "out/app", To: "/app", Mode: "0755"}}}
	for _, tc := range []struct {
		compression source.Compression
		want        types.MediaType
	}{
		{source.CompressionAuto, types.OCIUncompressedLayer},
		{source.CompressionGzip, types.OCILayer},
	} {
		t.Run(string(tc.want), func(t *testing.T) {
			g := NewWithT(t)
			b, err := NewBuilder(Registry{Prefix: host + "/team", Insecure: true, Compression: tc.compression}, fastRetries())
			g.Expect(err).NotTo(HaveOccurred())
			res, err := b.Build(context.Background(), img, dir, nil)
			g.Expect(err).NotTo(HaveOccurred())
			pulled := testregistry.Pull(t, res.Repository+"@"+res.Digest)
			m, err := pulled.Manifest()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(m.Layers).To(HaveLen(1))
			g.Expect(m.Layers[0].MediaType).To(Equal(tc.want))
			layers, err := pulled.Layers()
			g.Expect(err).NotTo(HaveOccurred())
			entries := readLayer(t, layers[0])
			g.Expect(entries).To(ContainElement(HaveField("Name", "app")))
			g.Expect(entries).To(ContainElement(HaveField("Content", "binary")))
		})
	}
}

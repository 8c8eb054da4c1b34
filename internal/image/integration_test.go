package image

import (
	"context"
	"io"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/remote"
	. "github.com/onsi/gomega"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testfiles"
	"github.com/devloop-dev/devloop/internal/testregistry"
)

// TestBuildAgainstDistributionRegistry runs the in-process path against the
// real distribution registry, which links blobs per repository (base layers
// are mounted across repositories) and validates manifests and indexes
// strictly.
func TestBuildAgainstDistributionRegistry(t *testing.T) {
	host := testregistry.Start(t)
	base := pushBase(t, host, "base/multi", "linux/amd64", "linux/arm64")
	ctx := context.Background()

	t.Run("one platform: change one file, then nothing", func(t *testing.T) {
		g := NewWithT(t)
		b, rt := testBuilder(t, host, WithCacheDir(t.TempDir()))
		dir := testfiles.Tree(t, map[string]string{"bin/app": string(randomBytes(4, 2<<20)), "conf/a.yaml": "a: 1"})
		img := Spec{
			Name:       "app",
			Base:       base,
			Layers:     []v1alpha1.LayerMapping{{From: "bin/app", To: "/app", Mode: "0755"}, {From: "conf", To: "/etc/app"}},
			Entrypoint: []string{"/app"},
		}

		first, err := b.Build(ctx, img, dir, staticTags("latest"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(first.Uploaded).To(Equal(3), "two layers and the config; the base's layers are mounted")
		g.Expect(tagDigest(t, host, "team/app", "latest")).To(Equal(first.Digest))
		g.Expect(tagDigest(t, host, "team/app", first.ContentHash)).To(Equal(first.Digest))
		rt.take()

		testfiles.WriteFile(t, dir, "conf/a.yaml", "a: 2")
		second, err := b.Build(ctx, img, dir, staticTags("latest"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(second.Uploaded).To(Equal(2))
		g.Expect(uploadedDigests(rt.take())).To(HaveLen(2))
		g.Expect(tagDigest(t, host, "team/app", "latest")).To(Equal(second.Digest))

		third, err := b.Build(ctx, img, dir, staticTags("latest"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(third.Pushed).To(BeFalse())
		g.Expect(writes(rt.take())).To(BeEmpty())
	})

	t.Run("several platforms: an index on the base's platforms", func(t *testing.T) {
		g := NewWithT(t)
		b, _ := testBuilder(t, host)
		dir := testfiles.Tree(t, map[string]string{"run.sh": "#!/bin/sh"})
		img := Spec{
			Name:      "tool",
			Base:      base,
			Platforms: []string{"linux/amd64", "linux/arm64"},
			Layers:    []v1alpha1.LayerMapping{{From: "run.sh", To: "/usr/local/bin/run.sh", Mode: "0755"}},
		}
		res, err := b.Build(ctx, img, dir, staticTags("dev"))
		g.Expect(err).NotTo(HaveOccurred())
		idx := testregistry.PullIndex(t, res.Repository+":dev")
		d, err := idx.Digest()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(d.String()).To(Equal(res.Digest))
		im, err := idx.IndexManifest()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(im.Manifests).To(HaveLen(2))

		again, err := b.Build(ctx, img, dir, staticTags("dev"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(again.Pushed).To(BeFalse())
	})
}

// TestCachedBaseLayers checks that with a cache directory the base's layers
// are read through the disk cache and still mountable from the base's
// repository.
func TestCachedBaseLayers(t *testing.T) {
	g := NewWithT(t)
	host := startRegistry(t, nil)
	base := pushBase(t, host, "base/static", "linux/amd64")
	cacheDir := t.TempDir()
	b, _ := testBuilder(t, host, WithCacheDir(cacheDir))

	img, err := b.Assemble(context.Background(), Spec{Name: "app", Base: base}, "linux/amd64", "")
	g.Expect(err).NotTo(HaveOccurred())
	layers, err := img.Layers()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(layers).To(HaveLen(2))
	for _, l := range layers {
		g.Expect(l).To(BeAssignableToTypeOf(&remote.MountableLayer{}))
		rc, err := l.Compressed()
		g.Expect(err).NotTo(HaveOccurred())
		_, err = io.Copy(io.Discard, rc)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(rc.Close()).To(Succeed())
		d, err := l.Digest()
		g.Expect(err).NotTo(HaveOccurred())
		cached, _ := filepath.Glob(filepath.Join(cacheDir, "*", d.String()))
		g.Expect(cached).To(HaveLen(1), "layer %s not in the cache of its repository", d)
	}
}

package image

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	. "github.com/onsi/gomega"
)

// Issue 31, item 1, for the shared base-layer cache: tenant A builds on
// its private base, whose layers land in the operator's cache. Tenant B
// runs a registry holding a manifest (and config) that lists A's layers,
// but not the layers themselves, and builds on it. B's build must read
// the layers from B's registry, which does not have them, and never be
// handed A's bytes from the cache.
func TestBaseLayersCachedForOneRepositoryAreNotServedForAnother(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cacheDir := t.TempDir()

	hostA := startRegistry(t, nil)
	baseA := pushBase(t, hostA, "team-a/private-base", "linux/amd64")
	bA, _ := testBuilder(t, hostA, WithCacheDir(cacheDir))
	imgA, err := bA.Assemble(ctx, Spec{Name: "app", Base: baseA}, "linux/amd64", "")
	g.Expect(err).NotTo(HaveOccurred())
	layersA, err := imgA.Layers()
	g.Expect(err).NotTo(HaveOccurred())
	var digestsA []string
	for _, l := range layersA {
		readAll(g, l.Compressed)
		d, err := l.Digest()
		g.Expect(err).NotTo(HaveOccurred())
		digestsA = append(digestsA, d.String())
	}

	// B's registry: the same manifest and config, and a 404 for every
	// request naming one of A's layers.
	var asked atomic.Int64
	hostB := startRegistry(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			for _, d := range digestsA {
				if strings.Contains(r.URL.Path, d) || strings.Contains(r.URL.RawQuery, d) {
					asked.Add(1)
					http.Error(w, `{"errors":[{"code":"BLOB_UNKNOWN","message":"unknown"}]}`, http.StatusNotFound)
					return
				}
			}
			next.ServeHTTP(w, r)
		})
	})
	baseRef, err := name.ParseReference(baseA, name.Insecure)
	g.Expect(err).NotTo(HaveOccurred())
	src, err := remote.Image(baseRef)
	g.Expect(err).NotTo(HaveOccurred())
	copyB, err := name.ParseReference(hostB+"/team-b/base:latest", name.Insecure)
	g.Expect(err).NotTo(HaveOccurred())
	m, err := src.RawManifest()
	g.Expect(err).NotTo(HaveOccurred())
	mt, err := src.MediaType()
	g.Expect(err).NotTo(HaveOccurred())
	cfg, err := src.RawConfigFile()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(remote.WriteLayer(copyB.Context(), static.NewLayer(cfg, types.OCIConfigJSON))).To(Succeed())
	g.Expect(remote.Put(copyB, rawManifest{m, mt})).To(Succeed())

	bB, _ := testBuilder(t, hostB, WithCacheDir(cacheDir))
	imgB, err := bB.Assemble(ctx, Spec{Name: "app", Base: copyB.String()}, "linux/amd64", "")
	g.Expect(err).NotTo(HaveOccurred(), "the manifest is B's to read")
	layersB, err := imgB.Layers()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(layersB).NotTo(BeEmpty())
	for _, l := range layersB {
		rc, err := l.Compressed()
		if err == nil {
			_, err = io.Copy(io.Discard, rc)
			_ = rc.Close()
		}
		g.Expect(err).To(HaveOccurred(), "tenant B read a layer of A's private base from the cache")
	}
	g.Expect(asked.Load()).NotTo(BeZero(), "B's registry was never asked for the layers")
}

func readAll(g Gomega, open func() (io.ReadCloser, error)) {
	rc, err := open()
	g.Expect(err).NotTo(HaveOccurred())
	_, err = io.Copy(io.Discard, rc)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rc.Close()).To(Succeed())
}

// rawManifest is a manifest as bytes, for remote.Put.
type rawManifest struct {
	b  []byte
	mt types.MediaType
}

func (r rawManifest) RawManifest() ([]byte, error)        { return r.b, nil }
func (r rawManifest) MediaType() (types.MediaType, error) { return r.mt, nil }

// A base's config is read whole: one whose manifest gives it more than
// maxBaseConfig bytes is refused before a byte of it is read.
func TestBaseConfigIsBounded(t *testing.T) {
	g := NewWithT(t)
	var configReads atomic.Int64
	host := startRegistry(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/") {
				configReads.Add(1)
			}
			next.ServeHTTP(w, r)
		})
	})
	cfg := []byte(`{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}`)
	ref := mustRef(t, host+"/team-b/huge-config:latest")
	g.Expect(remote.WriteLayer(ref.Context(), static.NewLayer(cfg, types.OCIConfigJSON))).To(Succeed())
	cl := static.NewLayer(cfg, types.OCIConfigJSON)
	d, err := cl.Digest()
	g.Expect(err).NotTo(HaveOccurred())
	manifest := fmt.Sprintf(`{"schemaVersion":2,"mediaType":%q,"config":{"mediaType":%q,"digest":%q,"size":%d},"layers":[]}`,
		types.OCIManifestSchema1, types.OCIConfigJSON, d, int64(4)<<30)
	g.Expect(remote.Put(ref, rawManifest{[]byte(manifest), types.OCIManifestSchema1})).To(Succeed())
	configReads.Store(0)

	b, _ := testBuilder(t, host)
	_, err = b.Assemble(context.Background(), Spec{Name: "app", Base: ref.String()}, "linux/amd64", "")
	g.Expect(err).To(MatchError(ContainSubstring("its config takes 4294967296 bytes, more than the 8388608 the operator reads")))
	g.Expect(configReads.Load()).To(BeZero())
}

func mustRef(t *testing.T, s string) name.Reference {
	t.Helper()
	r, err := name.ParseReference(s, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

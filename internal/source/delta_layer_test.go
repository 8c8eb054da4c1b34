package source

import (
	"bytes"
	"context"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/devloop-dev/devloop/internal/testfiles"
)

// binaryBytes is a binary-like file of n bytes, the same for a seed.
func binaryBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
	return b
}

func binaryLayer(t *testing.T, body []byte) MappedLayer {
	return MappedLayer{From: "bin/server", To: "server", Layer: static.NewLayer(
		tarOf(t, entry{name: "server", typ: '0', body: string(body), mode: 0o755}), types.OCIUncompressedLayer)}
}

// deltaRegistry is a registry that counts the bytes of blobs uploaded to
// it.
func deltaRegistry(t *testing.T) (string, *countingUploads) {
	t.Helper()
	up := &countingUploads{h: registry.New(registry.Logger(log.New(io.Discard, "", 0)))}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	return hostOf(srv) + "/team-a/src", up
}

func layerTar(t *testing.T, l v1.Layer) []byte {
	t.Helper()
	rc, err := l.Compressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A rebuilt binary pushed against the last push's layer crosses as a
// delta: the upload is a fraction of the binary, and the fetched tree and
// the kept blob of the mapped layer are exactly those of a whole push.
func TestABinaryIsPushedAsADeltaAndFetchedWhole(t *testing.T) {
	repo, uploads := deltaRegistry(t)
	ctx := context.Background()
	old := binaryBytes(256<<10, 1)
	dir := testfiles.Tree(t, map[string]string{"deploy/app.yaml": "kind: ConfigMap"})
	first := binaryLayer(t, old)
	img, err := PackDir(dir, nil, CompressionNone, first)
	if err != nil {
		t.Fatal(err)
	}
	if err := PushArtifact(ctx, img, repo+":dev", PushOptions{Insecure: true}); err != nil {
		t.Fatal(err)
	}
	baseDigest, _ := first.Layer.Digest()
	base := &DeltaBase{Digest: baseDigest, Tar: layerTar(t, first.Layer)}

	next := bytes.Clone(old)
	copy(next[1000:], "version 2") // a rebuild: a few bytes differ
	second := binaryLayer(t, next)
	second.Base = base
	img, err = PackDir(dir, nil, CompressionNone, second)
	if err != nil {
		t.Fatal(err)
	}
	before := uploads.bytes.Load()
	if err := PushArtifact(ctx, img, repo+":dev", PushOptions{Insecure: true}); err != nil {
		t.Fatal(err)
	}
	sent := uploads.bytes.Load() - before
	if sent > 16<<10 {
		t.Errorf("the second push uploaded %d bytes for a %d-byte binary that changed in 9", sent, len(next))
	}
	t.Logf("second push: %d bytes uploaded for a %d-byte binary", sent, len(next))

	a, err := fetchDev(t, repo)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(a.Dir, "bin/server")); err != nil || !bytes.Equal(got, next) {
		t.Errorf("bin/server fetched: %d bytes, %v; want the rebuilt binary", len(got), err)
	}
	if got := readFile(t, filepath.Join(a.Dir, "deploy/app.yaml")); got != "kind: ConfigMap" {
		t.Errorf("deploy/app.yaml = %q", got)
	}
	wantDigest, _ := second.Layer.Digest()
	if len(a.Prebuilt) != 1 || a.Prebuilt[0].Digest != wantDigest.String() || a.Prebuilt[0].From != "bin/server" {
		t.Fatalf("prebuilt %+v, want the whole layer %s", a.Prebuilt, wantDigest)
	}
	if blob, err := os.ReadFile(a.Prebuilt[0].File); err != nil || !bytes.Equal(blob, layerTar(t, second.Layer)) {
		t.Errorf("the kept blob is not the whole layer (%v)", err)
	}
}

// A delta that does not make the layer it names, or whose base is not in
// the artifact, is refused naming the layer; nothing is extracted.
func TestADeltaThatDoesNotMakeItsLayerIsRefused(t *testing.T) {
	ctx := context.Background()
	old := binaryBytes(64<<10, 2)
	next := bytes.Clone(old)
	copy(next[10:], "v2")
	first, second := binaryLayer(t, old), binaryLayer(t, next)
	baseDigest, _ := first.Layer.Digest()
	adds, ok, err := deltaAddenda(second, &DeltaBase{Digest: baseDigest, Tar: layerTar(t, first.Layer)})
	if err != nil || !ok {
		t.Fatalf("deltaAddenda: %v %v", ok, err)
	}
	t.Run("base first in the artifact, made whole", func(t *testing.T) {
		repo, _ := deltaRegistry(t)
		img, err := mutate.Append(emptyArtifact(), adds...)
		if err != nil {
			t.Fatal(err)
		}
		if err := PushArtifact(ctx, img, repo+":dev", PushOptions{Insecure: true}); err != nil {
			t.Fatal(err)
		}
		a, err := fetchDev(t, repo)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(filepath.Join(a.Dir, "bin/server")); err != nil || !bytes.Equal(got, next) {
			t.Errorf("bin/server: %d bytes, %v; want the rebuilt binary", len(got), err)
		}
	})
	for _, tc := range []struct {
		name string
		edit func([]mutate.Addendum) []mutate.Addendum
		want string
	}{
		{"another digest", func(a []mutate.Addendum) []mutate.Addendum {
			a[1].Annotations = copyAnnotations(a[1].Annotations, AnnotationDeltaDigest, "sha256:"+digestOfBytes([]byte("other")))
			return a
		}, "does not make"},
		{"base not in the artifact", func(a []mutate.Addendum) []mutate.Addendum { return a[1:] }, "is not a layer of the artifact"},
		{"not mapped", func(a []mutate.Addendum) []mutate.Addendum {
			a[1].Annotations = copyAnnotations(a[1].Annotations, AnnotationLayerFrom, "")
			return a
		}, "layer 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo, _ := deltaRegistry(t)
			img, err := mutate.Append(mutate.MediaType(emptyArtifact(), types.OCIManifestSchema1), tc.edit(append([]mutate.Addendum(nil), adds...))...)
			if err != nil {
				t.Fatal(err)
			}
			if err := PushArtifact(ctx, img, repo+":dev", PushOptions{Insecure: true}); err != nil {
				t.Fatal(err)
			}
			_, err = fetchDev(t, repo)
			expectError(t, err, permanent, []string{tc.want})
		})
	}
}

func copyAnnotations(a map[string]string, k, v string) map[string]string {
	out := map[string]string{}
	for key, val := range a {
		out[key] = val
	}
	if v == "" {
		delete(out, k)
	} else {
		out[k] = v
	}
	return out
}

func emptyArtifact() v1.Image { return empty.Image }

// countingUploads counts the bytes of blob uploads (PATCH and PUT bodies),
// and the GETs of each blob.
type countingUploads struct {
	h     http.Handler
	bytes atomic.Int64
	mu    sync.Mutex
	gets  map[string]int
}

// blobGets is how many times the blob of l was downloaded.
func (c *countingUploads) blobGets(t *testing.T, l v1.Layer) int {
	d, err := l.Digest()
	if err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gets[d.String()]
}

func (c *countingUploads) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, digest, ok := strings.Cut(r.URL.Path, "/blobs/"); ok && r.Method == http.MethodGet {
		c.mu.Lock()
		if c.gets == nil {
			c.gets = map[string]int{}
		}
		c.gets[digest]++
		c.mu.Unlock()
	}
	if (r.Method == http.MethodPatch || r.Method == http.MethodPut) && strings.Contains(r.URL.Path, "/blobs/uploads/") {
		body, _ := io.ReadAll(r.Body)
		c.bytes.Add(int64(len(body)))
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	c.h.ServeHTTP(w, r)
}

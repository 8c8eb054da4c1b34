package source

import (
	"bytes"
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/devloop-dev/devloop/internal/testfiles"
)

// fetchPacked pushes the pack of dir with mapped to a registry and fetches
// it back through the store.
func fetchPacked(t *testing.T, dir string, mapped ...MappedLayer) (*Artifact, error) {
	t.Helper()
	img, err := PackDir(dir, nil, CompressionNone, mapped...)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	repo := hostOf(srv) + "/team-a/src"
	if err := PushArtifact(context.Background(), img, repo+":dev", PushOptions{Insecure: true}); err != nil {
		t.Fatal(err)
	}
	return fetchDev(t, repo)
}

// fetchDev fetches repo:dev through a new store.
func fetchDev(t *testing.T, repo string) (*Artifact, error) {
	t.Helper()
	f := newFetcher(t)
	ref, err := f.Resolve(context.Background(), testNamespace, ociSource(repo, "dev", "", true))
	if err != nil {
		t.Fatal(err)
	}
	return f.Fetch(context.Background(), ref, nil)
}

func mappedLayer(t *testing.T, from, to string, entries ...entry) MappedLayer {
	return MappedLayer{From: from, To: to, Layer: static.NewLayer(tarOf(t, entries...), types.OCIUncompressedLayer)}
}

// TestMappedLayersComeBackAtTheirSourcePaths: a push whose files travel in
// image-shaped layers fetches as the same tree a plain pack gives, and the
// store keeps those layers' blobs for the build.
func TestMappedLayersComeBackAtTheirSourcePaths(t *testing.T) {
	dir := testfiles.Tree(t, map[string]string{"bin/web": "new binary", "chart/Chart.yaml": "name: web", "conf/a.yaml": "a: 1"})
	web := mappedLayer(t, "bin/web", "usr/local/bin/web",
		tdir("usr/"), tdir("usr/local/"), tdir("usr/local/bin/"), entry{name: "usr/local/bin/web", typ: '0', body: "new binary", mode: 0o755})
	conf := mappedLayer(t, "conf", "etc/app",
		tdir("etc/"), tdir("etc/app/"), tfile("etc/app/a.yaml", "a: 1"))

	img, err := PackDir(dir, nil, CompressionNone, web, conf)
	if err != nil {
		t.Fatal(err)
	}
	layers, _ := img.Layers()
	if len(layers) != 3 {
		t.Fatalf("want the rest, then two mapped layers; got %d layers", len(layers))
	}
	a, err := fetchPacked(t, dir, web, conf)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{"bin/web": "new binary", "chart/Chart.yaml": "name: web", "conf/a.yaml": "a: 1"} {
		if got := readFile(t, filepath.Join(a.Dir, p)); got != want {
			t.Errorf("%s = %q, want %q", p, got, want)
		}
	}
	if fi, err := os.Stat(filepath.Join(a.Dir, "bin/web")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("bin/web: %v %v, want mode 0755", fi, err)
	}
	for _, gone := range []string{"usr", "etc"} {
		if _, err := os.Lstat(filepath.Join(a.Dir, gone)); err == nil {
			t.Errorf("%s: the image's directories leaked into the source", gone)
		}
	}
	if len(a.Prebuilt) != 2 {
		t.Fatalf("prebuilt = %+v, want two", a.Prebuilt)
	}
	d, _ := web.Layer.Digest()
	p := a.Prebuilt[0]
	if p.From != "bin/web" || p.To != "usr/local/bin/web" || p.Digest != d.String() {
		t.Errorf("prebuilt[0] = %+v", p)
	}
	blob, err := os.ReadFile(p.File)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := web.Layer.Compressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	want, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(blob, want) || int64(len(blob)) != p.Size {
		t.Errorf("kept blob (%d bytes) is not the pushed layer (%d bytes)", len(blob), len(want))
	}
}

// TestMappedLayerMayHoldOnlyItsPath: the annotations of a layer cannot be
// used to write elsewhere in the source, or to smuggle in what the image
// code never writes.
func TestMappedLayerMayHoldOnlyItsPath(t *testing.T) {
	dir := testfiles.Tree(t, map[string]string{"chart/Chart.yaml": "name: web"})
	for _, tc := range []struct {
		name  string
		layer MappedLayer
		want  string
	}{
		{"a file beside the mapped path", mappedLayer(t, "bin/web", "web", tfile("web", "x"), tfile("etc/passwd", "root")), `holds "etc/passwd", which is not under "web"`},
		{"a hard link", mappedLayer(t, "bin", "app", tdir("app/"), tfile("app/a", "x"), thardlink("app/b", "app/a")), "hard link"},
		{"a whiteout", mappedLayer(t, "chart", "chart", tdir("chart/"), tfile("chart/.wh.Chart.yaml", "")), "whiteout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := fetchPacked(t, dir, tc.layer)
			expectError(t, err, permanent, []string{"unsafe content", tc.want})
		})
	}
}

func TestPackDirRefusesBadMappedLayers(t *testing.T) {
	dir := testfiles.Tree(t, map[string]string{"bin/web": "x"})
	gz := MappedLayer{From: "bin/web", To: "web", Layer: static.NewLayer(gzipped(t, tarOf(t, tfile("web", "x"))), types.OCILayer)}
	for _, tc := range []struct {
		name   string
		mapped []MappedLayer
		want   string
	}{
		{"overlapping", []MappedLayer{mappedLayer(t, "bin", "bin"), mappedLayer(t, "bin/web", "web")}, "overlap"},
		{"escaping", []MappedLayer{mappedLayer(t, "../x", "x")}, "inside the source"},
		{"absolute target", []MappedLayer{mappedLayer(t, "bin/web", "/web")}, "relative image path"},
		{"compressed", []MappedLayer{gz}, "only uncompressed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := PackDir(dir, nil, CompressionNone, tc.mapped...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// TestLayerTailIsBounded: what follows a layer's tar is read (so its
// digest is verified), but not without bound.
func TestLayerTailIsBounded(t *testing.T) {
	padded := append(tarOf(t, tfile("a.txt", "a")), make([]byte, 10240)...)
	reg := newOCIRegistry(t, padded)
	f := newFetcher(t)
	ref, err := f.Resolve(context.Background(), testNamespace, ociSource(reg.repo, "dev", "", true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Fetch(context.Background(), ref, nil); err != nil {
		t.Fatalf("a tar padded to a record: %v", err)
	}

	huge := newOCIRegistry(t, append(tarOf(t, tfile("a.txt", "a")), make([]byte, 2<<20)...))
	ref, err = f.Resolve(context.Background(), testNamespace, ociSource(huge.repo, "dev", "", true))
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Fetch(context.Background(), ref, nil)
	expectError(t, err, permanent, []string{"after the end of the archive"})
}

package liveupdate

import (
	"archive/tar"
	"bytes"
	"io"
	"sync/atomic"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// withCountedLayer is img with one more layer holding files, and a count
// of the times that layer's content is opened after it was made.
func withCountedLayer(t *testing.T, img v1.Image, files map[string]string) (v1.Image, *atomic.Int64) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range []string{"srv/static/index.html", "web"} { // tar order
		content, ok := files[name]
		if !ok {
			continue
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(content))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	opened := &atomic.Int64{}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		opened.Add(1)
		return io.NopCloser(bytes.NewReader(data)), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Its digest and diff ID known, as an assembled layer's are.
	if _, err := l.Digest(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.DiffID(); err != nil {
		t.Fatal(err)
	}
	out, err := mutate.AppendLayers(img, l)
	if err != nil {
		t.Fatal(err)
	}
	opened.Store(0)
	return out, opened
}

// TestALiveUpdateReadsTheNewLayerOnce: deciding a live update and writing
// its tar read the new build's changed layer once (issue 46: nothing
// read twice on the hot path): the changed files' content is kept from
// the pass that compares them. Before, the tar was written by reading
// the layer a second time.
func TestALiveUpdateReadsTheNewLayerOnce(t *testing.T) {
	base := testImage(t, nil, layerFiles{"etc/os-release": "distroless"})
	old, _ := withCountedLayer(t, base, map[string]string{"web": "binary v1", "srv/static/index.html": "<h1>1</h1>"})
	next, opened := withCountedLayer(t, base, map[string]string{"web": "binary v2", "srv/static/index.html": "<h1>1</h1>"})

	d, err := Decide(old, next, []string{"/web", "/srv/static"})
	if err != nil {
		t.Fatal(err)
	}
	if !d.Live {
		t.Fatalf("want a live update, got a rollout: %s", d.Reason)
	}
	var buf bytes.Buffer
	if err := WriteTar(&buf, next, d.Files, DefaultMaxBytes); err != nil {
		t.Fatal(err)
	}
	got := readTar(t, buf.Bytes())
	if len(got) != 1 || got["/web"] != "755:binary v2" {
		t.Fatalf("tar holds %v, want /web at binary v2 alone", got)
	}
	if n := opened.Load(); n != 1 {
		t.Fatalf("the new layer was read %d times, want once", n)
	}
}

// TestALiveUpdateOverItsBudgetIsRolledOut: a changed file larger than a
// live update carries is not kept from the comparing pass, and the tar
// still refuses it (ErrTooBig), so it is rolled out as before.
func TestALiveUpdateOverItsBudgetIsRolledOut(t *testing.T) {
	base := testImage(t, nil, layerFiles{"etc/os-release": "distroless"})
	old, _ := withCountedLayer(t, base, map[string]string{"web": "binary v1"})
	next, _ := withCountedLayer(t, base, map[string]string{"web": "binary v2 that is longer"})
	d, err := Decide(old, next, []string{"/web"})
	if err != nil || !d.Live {
		t.Fatalf("want a live update decided, got %v, %v", d, err)
	}
	err = WriteTar(io.Discard, next, d.Files, 8)
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte(ErrTooBig.Error())) {
		t.Fatalf("want ErrTooBig past 8 bytes, got %v", err)
	}
}

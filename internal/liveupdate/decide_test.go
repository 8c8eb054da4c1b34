package liveupdate

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/devloop-dev/devloop/internal/testfiles"
)

// layerFiles is one layer: path -> content; a mode of 0755 for paths
// ending in "*" (the star is dropped).
type layerFiles map[string]string

// testImage makes an image of layers on an empty base, with env.
func testImage(t *testing.T, env []string, layers ...layerFiles) v1.Image {
	t.Helper()
	img := empty.Image
	for _, files := range layers {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		names := make([]string, 0, len(files))
		for n := range files {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			mode := int64(0o644)
			name := n
			if strings.HasSuffix(n, "*") {
				mode, name = 0o755, strings.TrimSuffix(n, "*")
			}
			if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: mode, Size: int64(len(files[n]))}); err != nil {
				t.Fatal(err)
			}
			if _, err := tw.Write([]byte(files[n])); err != nil {
				t.Fatal(err)
			}
		}
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		data := buf.Bytes()
		l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
		if err != nil {
			t.Fatal(err)
		}
		if img, err = mutate.AppendLayers(img, l); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", "amd64"
	cfg.Config.Entrypoint = []string{"/web"}
	cfg.Config.Env = env
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// readTar is a live update's tar as name -> "mode:content".
func readTar(t *testing.T, data []byte) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, e := range testfiles.ReadTar(t, bytes.NewReader(data)) {
		out[e.Name] = fmt.Sprintf("%03o:%s", e.Mode, e.Content)
	}
	return out
}

// TestDecidePerChangedPath: the live update decision for each kind of
// change between the image the pods run and a new build, and the tar
// the live ones carry.
func TestDecidePerChangedPath(t *testing.T) {
	base := layerFiles{"etc/os-release": "distroless"}
	old := testImage(t, []string{"A=1"}, base, layerFiles{"web*": "binary v1"}, layerFiles{"srv/static/index.html": "<h1>1</h1>", "srv/static/old.css": "x"})
	cases := []struct {
		name   string
		next   v1.Image
		paths  []string
		reason string            // a rollout, naming this
		tar    map[string]string // a live update, carrying this
	}{
		{name: "only the binary", paths: []string{"/web"},
			next: testImage(t, []string{"A=1"}, base, layerFiles{"web*": "binary v2"}, layerFiles{"srv/static/index.html": "<h1>1</h1>", "srv/static/old.css": "x"}),
			tar:  map[string]string{"/web": "755:binary v2"}},
		{name: "a static file outside the paths", paths: []string{"/web"},
			next:   testImage(t, []string{"A=1"}, base, layerFiles{"web*": "binary v1"}, layerFiles{"srv/static/index.html": "<h1>2</h1>", "srv/static/old.css": "x"}),
			reason: "/srv/static/index.html changed, outside liveUpdate.paths"},
		{name: "a directory of the paths: changed and deleted files", paths: []string{"/web", "/srv/static/"},
			next: testImage(t, []string{"A=1"}, base, layerFiles{"web*": "binary v2"}, layerFiles{"srv/static/index.html": "<h1>2</h1>"}),
			tar:  map[string]string{"/web": "755:binary v2", "/srv/static/index.html": "644:<h1>2</h1>", "/srv/static/.wh.old.css": "644:"}},
		{name: "the base image", paths: []string{"/web"},
			next:   testImage(t, []string{"A=1"}, layerFiles{"etc/os-release": "debian"}, layerFiles{"web*": "binary v2"}, layerFiles{"srv/static/index.html": "<h1>1</h1>", "srv/static/old.css": "x"}),
			reason: "/etc/os-release changed, outside liveUpdate.paths"},
		{name: "an env var", paths: []string{"/web"},
			next:   testImage(t, []string{"A=2"}, base, layerFiles{"web*": "binary v2"}, layerFiles{"srv/static/index.html": "<h1>1</h1>", "srv/static/old.css": "x"}),
			reason: "the image config's Env changed"},
		{name: "a layer more", paths: []string{"/web"},
			next:   testImage(t, []string{"A=1"}, base, layerFiles{"web*": "binary v1"}, layerFiles{"srv/static/index.html": "<h1>1</h1>", "srv/static/old.css": "x"}, layerFiles{"extra": "y"}),
			reason: "the image has 4 layers where the pods' has 3"},
		{name: "a prefix of a path is not under it", paths: []string{"/we"},
			next:   testImage(t, []string{"A=1"}, base, layerFiles{"web*": "binary v2"}, layerFiles{"srv/static/index.html": "<h1>1</h1>", "srv/static/old.css": "x"}),
			reason: "/web changed, outside liveUpdate.paths"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Decide(old, tc.next, tc.paths)
			if err != nil {
				t.Fatal(err)
			}
			if tc.reason != "" {
				if d.Live || !strings.Contains(d.Reason, tc.reason) {
					t.Fatalf("want a rollout naming %q, got live=%v reason %q", tc.reason, d.Live, d.Reason)
				}
				return
			}
			if !d.Live {
				t.Fatalf("want a live update, got a rollout: %s", d.Reason)
			}
			var buf bytes.Buffer
			if err := WriteTar(&buf, tc.next, d.Files, DefaultMaxBytes); err != nil {
				t.Fatal(err)
			}
			got := readTar(t, buf.Bytes())
			if len(got) != len(tc.tar) {
				t.Fatalf("tar holds %v, want %v", got, tc.tar)
			}
			for k, v := range tc.tar {
				if got[k] != v {
					t.Fatalf("tar entry %s = %q, want %q (all: %v)", k, got[k], v, got)
				}
			}
		})
	}
}

// TestDecideReadsCopiesUnderOrig: with the build's layout for live paths
// (the path a link into the live root, the image's file under
// /.devloop/orig), a changed copy is a change of the path it mirrors, and
// the tar names the path; a change of the supervisor is a rollout.
func TestDecideReadsCopiesUnderOrig(t *testing.T) {
	old := testImage(t, nil, layerFiles{".devloop/orig/web*": "binary v1"}, layerFiles{".devloop/supervisor*": "supervisor 1"})
	next := testImage(t, nil, layerFiles{".devloop/orig/web*": "binary v2"}, layerFiles{".devloop/supervisor*": "supervisor 1"})
	d, err := Decide(old, next, []string{"/web"})
	if err != nil || !d.Live {
		t.Fatalf("want a live update: %v %+v", err, d)
	}
	var buf bytes.Buffer
	if err := WriteTar(&buf, next, d.Files, DefaultMaxBytes); err != nil {
		t.Fatal(err)
	}
	if got := readTar(t, buf.Bytes()); len(got) != 1 || got["/web"] != "755:binary v2" {
		t.Fatalf("tar holds %v, want /web only", got)
	}
	upgraded := testImage(t, nil, layerFiles{".devloop/orig/web*": "binary v2"}, layerFiles{".devloop/supervisor*": "supervisor 2"})
	if d, _ := Decide(old, upgraded, []string{"/web"}); d.Live || !strings.Contains(d.Reason, "/.devloop/supervisor changed") {
		t.Fatalf("a new supervisor must roll out, got %+v", d)
	}
	// Too big for one sync: refused, so the caller rolls out.
	if err := WriteTar(io.Discard, next, d.Files, 4); !errors.Is(err, ErrTooBig) {
		t.Fatalf("want ErrTooBig past the cap, got %v", err)
	}
}

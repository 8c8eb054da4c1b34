package source

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// projectTree writes a tree of a real project's shape: dirs packages of
// files Go files each, of incompressible content (so sizes are what
// crosses a link), about 3 KiB a file.
func projectTree(t testing.TB, dirs, files int) string {
	t.Helper()
	root := t.TempDir()
	r := rand.New(rand.NewPCG(1, 2))
	for d := range dirs {
		dir := filepath.Join(root, "pkg", fmt.Sprintf("p%03d", d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for f := range files {
			b := make([]byte, 3<<10)
			for i := range b {
				b[i] = byte(r.Uint32())
			}
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d.go", f)), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root
}

func layerDigests(t *testing.T, img v1.Image) []v1.Hash {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	var out []v1.Hash
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// TestAnEditChangesOneLayer (issue 46): a tree of a real project's size
// is packed in several layers, and editing one file changes exactly one
// of them, wherever the file is: the others are the same blobs, which a
// registry already holds. Adding a directory changes at most two (the
// new one may begin a layer).
func TestAnEditChangesOneLayer(t *testing.T) {
	root := projectTree(t, 300, 4)
	before, err := PackDir(root, nil, CompressionNone)
	if err != nil {
		t.Fatal(err)
	}
	was := layerDigests(t, before)
	if len(was) < 4 {
		t.Fatalf("a %d-file tree of about 3.6 MiB packs in %d layers: an edit would upload most of it", 1200, len(was))
	}
	t.Logf("%d layers", len(was))
	for _, edited := range []string{"pkg/p000/f0.go", "pkg/p150/f2.go", "pkg/p299/f3.go"} {
		path := filepath.Join(root, filepath.FromSlash(edited))
		old, _ := os.ReadFile(path)
		if err := os.WriteFile(path, append([]byte("// edited\n"), old...), 0o644); err != nil {
			t.Fatal(err)
		}
		after, err := PackDir(root, nil, CompressionNone)
		if err != nil {
			t.Fatal(err)
		}
		now := layerDigests(t, after)
		if len(now) != len(was) || differing(was, now) != 1 {
			t.Errorf("editing %s: %d layers, %d of them different; want %d, 1", edited, len(now), differing(was, now), len(was))
		}
		if err := os.WriteFile(path, old, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "pkg", "p150a"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "pkg", "p150a", "new.go"), []byte("package p150a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	after, err := PackDir(root, nil, CompressionNone)
	if err != nil {
		t.Fatal(err)
	}
	if now := layerDigests(t, after); len(now) < len(was) || len(now) > len(was)+1 || unseen(was, now) > 2 {
		t.Errorf("adding a directory: %d layers (was %d), %d new; want at most 2 new", len(now), len(was), unseen(was, now))
	}

	// A small tree is one layer, as before.
	small, err := PackDir(projectTree(t, 3, 3), nil, CompressionNone)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(layerDigests(t, small)); n != 1 {
		t.Errorf("a 27 KiB tree packs in %d layers, want 1", n)
	}
}

func differing(a, b []v1.Hash) int {
	n := 0
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			n++
		}
	}
	return n
}

func unseen(was, now []v1.Hash) int {
	seen := map[v1.Hash]bool{}
	for _, h := range was {
		seen[h] = true
	}
	n := 0
	for _, h := range now {
		if !seen[h] {
			n++
		}
	}
	return n
}

// TestAPushAfterAnEditUploadsOnlyWhatChanged: pushed to a registry that
// counts the bytes it receives, a tree's first push sends all of it; the
// push after a one-file edit sends one layer's worth; and the operator's
// fetch of the edited artifact gives back the tree exactly (the same tree
// digest as the directory's).
func TestAPushAfterAnEditUploadsOnlyWhatChanged(t *testing.T) {
	var received atomic.Int64
	reg := registry.New()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > 0 {
			received.Add(r.ContentLength)
		}
		reg.ServeHTTP(w, r)
	}))
	defer srv.Close()
	ctx := context.Background()
	root := projectTree(t, 300, 4)
	ref := hostOf(srv) + "/team/src:dev"
	if _, err := PushDir(ctx, root, ref, true); err != nil {
		t.Fatal(err)
	}
	first := received.Load()
	path := filepath.Join(root, "pkg", "p123", "f1.go")
	if err := os.WriteFile(path, []byte("package p123 // edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	received.Store(0)
	if _, err := PushDir(ctx, root, ref, true); err != nil {
		t.Fatal(err)
	}
	second := received.Load()
	t.Logf("first push %d KiB, after a one-file edit %d KiB", first>>10, second>>10)
	if second*5 > first {
		t.Errorf("the push after a one-file edit sent %d bytes of the tree's %d: more than a fifth", second, first)
	}

	fetched := fetchedTreeIs(ctx, t, hostOf(srv)+"/team/src", root)
	if got := readFile(t, filepath.Join(fetched, "pkg", "p123", "f1.go")); got != "package p123 // edited\n" {
		t.Errorf("the edited file reads %q", got)
	}
}

// fetchedTreeIs fetches the tag dev of repository (plain HTTP) as an OCI
// source, checks the fetched tree is root's, byte for byte (TreeDigest),
// and returns where it was fetched.
func fetchedTreeIs(ctx context.Context, t *testing.T, repository, root string) string {
	t.Helper()
	f := newFetcher(t)
	resolved, err := f.Resolve(ctx, testNamespace, ociSource(repository, "dev", "", true))
	if err != nil {
		t.Fatal(err)
	}
	a, err := f.Fetch(ctx, resolved, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, err := TreeDigest(root)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := TreeDigest(a.Dir); err != nil || got != want {
		t.Errorf("the fetched tree's digest %s (%v), want the directory's %s", got, err, want)
	}
	return a.Dir
}

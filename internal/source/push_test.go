package source

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/crane"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/devloop-dev/devloop/internal/testfiles"
)

// entryNames lists the tar entries of a one-layer artifact.
func entryNames(t *testing.T, img v1.Image) []string {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("want one layer, got %d (%v)", len(layers), err)
	}
	var names []string
	for _, e := range testfiles.LayerEntries(t, layers[0]) {
		names = append(names, e.Name)
	}
	return names
}

func TestPackDirLeavesOutExcludedEntries(t *testing.T) {
	dir := testfiles.Tree(t, map[string]string{"main.go": "package main", "out/bin": "x", "keep/a.txt": "a", "keep/a.log": "log"})
	img, err := PackDir(dir, func(rel string, isDir bool) bool {
		return (rel == "out" && isDir) || strings.HasSuffix(rel, ".log")
	}, CompressionNone)
	if err != nil {
		t.Fatal(err)
	}
	got := entryNames(t, img)
	want := []string{"keep/", "keep/a.txt", "main.go"}
	if !slices.Equal(got, want) {
		t.Fatalf("entries = %v, want %v", got, want)
	}
}

func TestPackDirDigestIgnoresTimes(t *testing.T) {
	dir := testfiles.Tree(t, map[string]string{"a/b.txt": "b", "c.txt": "c"})
	first, err := PackDir(dir, nil, CompressionGzip)
	if err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	for _, p := range []string{"a/b.txt", "c.txt", "a"} {
		if err := os.Chtimes(filepath.Join(dir, p), later, later); err != nil {
			t.Fatal(err)
		}
	}
	second, err := PackDir(dir, nil, CompressionGzip)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := first.Digest()
	d2, _ := second.Digest()
	if d1 != d2 {
		t.Fatalf("digest changed with mtimes: %s then %s", d1, d2)
	}
	testfiles.Write(t, dir, map[string]string{"c.txt": "changed"})
	third, _ := PackDir(dir, nil, CompressionGzip)
	if d3, _ := third.Digest(); d3 == d1 {
		t.Fatal("digest did not change with content")
	}
}

func TestRemoteDigestAndPush(t *testing.T) {
	srv := httptest.NewServer(registry.New())
	defer srv.Close()
	ctx := context.Background()
	dir := testfiles.Tree(t, map[string]string{"f": "1"})
	ref := hostOf(srv) + "/team/src:dev"

	if d, err := RemoteDigest(ctx, ref, PushOptions{Insecure: true}); err != nil || d != "" {
		t.Fatalf("before a push: digest %q, err %v; want empty, nil", d, err)
	}
	pushed, err := PushDir(ctx, dir, ref, true, WithExclude(func(string, bool) bool { return false }))
	if err != nil {
		t.Fatal(err)
	}
	if d, err := RemoteDigest(ctx, ref, PushOptions{Insecure: true}); err != nil || d != pushed.String() {
		t.Fatalf("after a push: digest %q, err %v; want %s", d, err, pushed)
	}
	// The registry is on loopback: the layer goes as the plain tar.
	m, err := crane.Manifest(ref, crane.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	var manifest v1.Manifest
	if err := json.Unmarshal(m, &manifest); err != nil {
		t.Fatal(err)
	}
	if len(manifest.Layers) != 1 || manifest.Layers[0].MediaType != types.OCIUncompressedLayer {
		t.Fatalf("layers %+v, want one %s", manifest.Layers, types.OCIUncompressedLayer)
	}

	// Without insecure, the plain-HTTP registry is refused with what to do.
	_, err = PushDir(ctx, dir, ref, false)
	if err == nil || !strings.Contains(err.Error(), "insecure: true") {
		t.Fatalf("plain HTTP without insecure: err = %v, want a refusal naming insecure: true", err)
	}
}

// TestPackDirRefusesLinksLeavingTheDirectory: an absolute symlink, or one
// climbing out of the pushed directory, is refused before anything is
// pushed (the operator would refuse it on extraction); one inside stays.
func TestPackDirRefusesLinksLeavingTheDirectory(t *testing.T) {
	for name, link := range map[string]string{"absolute": "/etc/passwd", "climbing": "../../outside"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			testfiles.Write(t, dir, map[string]string{"sub/a.txt": "a"})
			if err := os.Symlink(link, filepath.Join(dir, "sub", "link")); err != nil {
				t.Fatal(err)
			}
			_, err := PackDir(dir, nil, CompressionNone)
			if err == nil || !strings.Contains(err.Error(), "sub/link is a symbolic link to "+link+", outside the pushed directory") {
				t.Fatalf("err = %v", err)
			}
		})
	}
	dir := testfiles.Tree(t, map[string]string{"sub/a.txt": "a"})
	if err := os.Symlink("a.txt", filepath.Join(dir, "sub", "link")); err != nil {
		t.Fatal(err)
	}
	if _, err := PackDir(dir, nil, CompressionNone); err != nil {
		t.Fatalf("a link inside the directory: %v", err)
	}
}

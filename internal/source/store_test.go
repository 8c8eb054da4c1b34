package source

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// artifactServer serves one tarball and counts downloads.
func artifactServer(t *testing.T, tgz []byte) (Ref, *counting) {
	t.Helper()
	c := &counting{h: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(tgz) })}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	return Ref{Source: "flux", Kind: KindArtifact, URL: srv.URL + "/a.tar.gz", Digest: sha256Of(tgz)}, c
}

func TestStoreIgnoresWhatACrashLeftBehind(t *testing.T) {
	tgz := gzipped(t, tarOf(t, tfile("a.txt", "complete")))
	ref, requests := artifactServer(t, tgz)
	f := &Fetcher{Root: t.TempDir()}
	name, err := entryName(ref.storeKey())
	if err != nil {
		t.Fatal(err)
	}

	// A fetch killed mid-extraction: a half tree under .tmp.
	half := filepath.Join(f.Root, tmpDir, name+"-123", contentDir)
	if err := os.MkdirAll(half, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(half, "a.txt"), []byte("compl"), 0o644); err != nil {
		t.Fatal(err)
	}
	// An entry damaged from outside: content without its metadata.
	if err := os.MkdirAll(filepath.Join(f.Root, name, contentDir), 0o755); err != nil {
		t.Fatal(err)
	}

	a, err := f.Fetch(context.Background(), ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	if requests.n.Load() != 1 {
		t.Errorf("made %d requests, want 1: leftovers must not count as content", requests.n.Load())
	}
	if got := readFile(t, filepath.Join(a.Dir, "a.txt")); got != "complete" {
		t.Errorf("a.txt = %q", got)
	}
	if a.Dir != filepath.Join(f.Root, name, contentDir) {
		t.Errorf("dir %s is not the store entry", a.Dir)
	}
}

func TestStoreSweepsStaleTemporaryEntries(t *testing.T) {
	tgz := gzipped(t, tarOf(t, tfile("a.txt", "x")))
	ref, _ := artifactServer(t, tgz)
	f := &Fetcher{Root: t.TempDir(), Timeout: time.Minute}
	stale := filepath.Join(f.Root, tmpDir, "sha256-old-1")
	fresh := filepath.Join(f.Root, tmpDir, "sha256-new-1")
	for _, d := range []string{stale, fresh} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-48 * time.Hour)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Fetch(context.Background(), ref, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale temporary entry kept: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("a possibly running fetch's entry was removed: %v", err)
	}
}

func TestStoreConcurrentFetchDownloadsOnce(t *testing.T) {
	tgz := gzipped(t, tarOf(t, tfile("a.txt", "x")))
	ref, requests := artifactServer(t, tgz)
	f := &Fetcher{Root: t.TempDir()}
	var wg sync.WaitGroup
	dirs := make([]string, 8)
	for i := range dirs {
		wg.Go(func() {
			a, err := f.Fetch(context.Background(), ref, nil)
			if err != nil {
				t.Error(err)
				return
			}
			dirs[i] = a.Dir
		})
	}
	wg.Wait()
	if n := requests.n.Load(); n != 1 {
		t.Errorf("%d downloads of one content, want 1", n)
	}
	for _, d := range dirs {
		if d != dirs[0] {
			t.Errorf("dirs differ: %v", dirs)
		}
	}
}

func TestStoreRefusesBadKeys(t *testing.T) {
	f := &Fetcher{Root: t.TempDir()}
	for _, ref := range []Ref{
		{Source: "x", Kind: KindOCI, URL: "r.example/x", Digest: "sha256:../../../etc"},
		{Source: "x", Kind: KindArtifact, URL: "http://x/a.tgz", Digest: ""},
		{Source: "x", Kind: KindArtifact, URL: "http://x/a.tgz", Digest: "sha256:" + strings.Repeat("A", 64)},
		{Source: "x", Kind: "svn", URL: "svn://x"},
	} {
		_, err := f.Fetch(context.Background(), ref, nil)
		expectError(t, err, permanent, []string{`source "x"`})
	}
	if entries, _ := os.ReadDir(f.Root); len(entries) != 0 {
		t.Errorf("store touched: %v", entries)
	}
}

// An entry is written without a flush and trusted only in the boot that
// wrote it: after a reboot (a power loss may have torn it) it is fetched
// again; within the boot it is reused.
func TestStoreRefetchesEntriesOfAnEarlierBoot(t *testing.T) {
	tgz := gzipped(t, tarOf(t, tfile("a.txt", "content")))
	ref, requests := artifactServer(t, tgz)
	f := &Fetcher{Root: t.TempDir()}
	boot := bootID
	t.Cleanup(func() { bootID = boot })
	bootID = func() string { return "boot-1" }

	ctx := context.Background()
	for range 2 {
		if _, err := f.Fetch(ctx, ref, nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := requests.n.Load(); n != 1 {
		t.Fatalf("two fetches in one boot made %d requests, want 1", n)
	}
	bootID = func() string { return "boot-2" }
	a, err := f.Fetch(ctx, ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := requests.n.Load(); n != 2 {
		t.Fatalf("a fetch after a reboot made %d requests in all, want 2 (the entry fetched again)", n)
	}
	if got := readFile(t, filepath.Join(a.Dir, "a.txt")); got != "content" {
		t.Errorf("a.txt = %q", got)
	}
}

// On a work directory that outlives the node (a PersistentVolumeClaim
// the operator takes to another node, or back after a reboot) entries are
// flushed when written and trusted in any boot: a manager that moved finds
// its sources and fetches none again.
func TestFlushedStoreKeepsEntriesAcrossBoots(t *testing.T) {
	tgz := gzipped(t, tarOf(t, tfile("a.txt", "content")))
	ref, requests := artifactServer(t, tgz)
	root := t.TempDir()
	boot := bootID
	t.Cleanup(func() { bootID = boot })
	bootID = func() string { return "node-1-boot" }

	ctx := context.Background()
	if _, err := (&Fetcher{Root: root, Flush: true}).Fetch(ctx, ref, nil); err != nil {
		t.Fatal(err)
	}
	// Another manager process, on another node, with the same volume.
	bootID = func() string { return "node-2-boot" }
	a, err := (&Fetcher{Root: root, Flush: true}).Fetch(ctx, ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := requests.n.Load(); n != 1 {
		t.Fatalf("the source was fetched %d times, want once: the moved manager fetched it again", n)
	}
	if got := readFile(t, filepath.Join(a.Dir, "a.txt")); got != "content" {
		t.Errorf("a.txt = %q", got)
	}
}

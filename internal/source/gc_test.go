package source

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// sizedArtifacts serves n artifacts of one file of size bytes each, all
// different, and counts downloads per artifact.
func sizedArtifacts(t *testing.T, n, size int) ([]Ref, []*counting) {
	t.Helper()
	refs := make([]Ref, n)
	counts := make([]*counting, n)
	for i := range n {
		body := fmt.Sprintf("%d", i) + strings.Repeat("x", size-len(fmt.Sprint(i)))
		refs[i], counts[i] = artifactServer(t, gzipped(t, tarOf(t, tfile("f", body))))
		refs[i].Source = fmt.Sprintf("src%d", i)
	}
	return refs, counts
}

// stored lists the store's entries by the index of their ref.
func storedRefs(t *testing.T, f *Fetcher, refs []Ref) []int {
	t.Helper()
	var in []int
	for i, r := range refs {
		name, err := entryName(r.storeKey())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(f.Root, name)); err == nil {
			in = append(in, i)
		}
	}
	return in
}

// diskSize is what the store's entries take, as the store counts it.
func diskSize(t *testing.T, f *Fetcher) int64 {
	t.Helper()
	des, err := os.ReadDir(f.Root)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, de := range des {
		if de.Name() != tmpDir {
			n += entrySize(filepath.Join(f.Root, de.Name()))
		}
	}
	return n
}

// oneEntrySize is what an entry of sizedArtifacts takes.
func oneEntrySize(t *testing.T, size int) int64 {
	t.Helper()
	refs, _ := sizedArtifacts(t, 1, size)
	f := &Fetcher{Root: t.TempDir()}
	if _, err := f.Fetch(context.Background(), refs[0], nil); err != nil {
		t.Fatal(err)
	}
	return diskSize(t, f)
}

// boundedStore is a Fetcher over n artifacts of sizedArtifacts, whose
// store holds storeEntries of their entries and an environment's share
// envEntries.
func boundedStore(t *testing.T, n int, storeEntries, envEntries float64) (*Fetcher, []Ref, []*counting) {
	t.Helper()
	const size = 40_000
	one := float64(oneEntrySize(t, size))
	refs, counts := sizedArtifacts(t, n, size)
	return &Fetcher{Root: t.TempDir(), MaxStoreBytes: int64(storeEntries * one), MaxEnvBytes: int64(envEntries * one)}, refs, counts
}

func sameInts(a, b []int) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

// The store stays within its bound: filling it past the bound evicts the
// least recently used entries no environment uses now, and keeps those in
// use (an environment's current source, however old).
func TestStoreGCEvictsOldestUnusedEntries(t *testing.T) {
	f, refs, counts := boundedStore(t, 6, 3.5, 10)
	ctx := context.Background()
	serve := func(env types.UID, i int) {
		t.Helper()
		f.Using(env, refs[i])
		if _, err := f.Serve(ctx, env, refs[i], nil); err != nil {
			t.Fatalf("serving %d to %s: %v", i, env, err)
		}
	}
	// "pinned" keeps using the first and oldest entry; "mover" moves on
	// to a new one five times, as `push --watch` does.
	serve("pinned", 0)
	for i := 1; i < len(refs); i++ {
		serve("mover", i)
		if got := diskSize(t, f); got > f.MaxStoreBytes {
			t.Fatalf("after %d: the store holds %d bytes, over its bound of %d", i, got, f.MaxStoreBytes)
		}
	}
	if got, want := storedRefs(t, f, refs), []int{0, 4, 5}; !sameInts(got, want) {
		t.Errorf("stored %v, want %v: the oldest unused go, the one in use and the newest stay", got, want)
	}
	// The entry in use is still served from the store.
	serve("pinned", 0)
	if n := counts[0].n.Load(); n != 1 {
		t.Errorf("the entry in use was downloaded %d times", n)
	}
	// An evicted one is fetched again.
	serve("pinned", 1)
	if n := counts[1].n.Load(); n != 2 {
		t.Errorf("an evicted entry was downloaded %d times, want 2", n)
	}

	t.Run("entries of a deleted environment go", func(t *testing.T) {
		f.Forget("mover")
		f.Forget("pinned")
		if got := storedRefs(t, f, refs); len(got) != 0 {
			t.Errorf("stored %v after every environment was forgotten", got)
		}
	})
}

// An environment is charged for what it was served, up to its share: its
// own oldest unused entries go first, others' stay, and sources in use
// that alone exceed the share are refused, naming the source.
func TestStoreEnvironmentShare(t *testing.T) {
	f, refs, _ := boundedStore(t, 16, 100, 2.5)
	ctx := context.Background()

	f.Using("b", refs[0])
	if _, err := f.Serve(ctx, "b", refs[0], nil); err != nil {
		t.Fatal(err)
	}
	f.Using("b") // b moved on: its entry is unused, but not a's to evict
	f.Using("a", refs[1], refs[2])
	for _, i := range []int{1, 2} {
		if _, err := f.Serve(ctx, "a", refs[i], nil); err != nil {
			t.Fatal(err)
		}
	}
	// a moves from 1 to 3: its oldest unused, 1, makes room.
	f.Using("a", refs[2], refs[3])
	if _, err := f.Serve(ctx, "a", refs[3], nil); err != nil {
		t.Fatal(err)
	}
	if got, want := storedRefs(t, f, refs[:4]), []int{0, 2, 3}; !sameInts(got, want) {
		t.Errorf("stored %v, want %v", got, want)
	}
	// Three sources in use exceed a share of two and a half.
	f.Using("a", refs[2], refs[3], refs[4])
	_, err := f.Serve(ctx, "a", refs[4], nil)
	expectError(t, err, permanent, []string{`source "src4"`, "share of the source store"})
	if got := storedRefs(t, f, refs[4:5]); len(got) != 0 {
		t.Errorf("a refused entry was stored")
	}

	t.Run("push --watch stays within the share", func(t *testing.T) {
		for i := 5; i < len(refs); i++ {
			f.Using("a", refs[i])
			if _, err := f.Serve(ctx, "a", refs[i], nil); err != nil {
				t.Fatal(err)
			}
		}
		if got := storedRefs(t, f, refs[1:]); len(got) > 2 {
			t.Errorf("after 11 pushes the environment holds %d entries (%v), more than its share", len(got), got)
		}
	})
}

// A hard link costs its file's size against the limit: a million links to
// one big file are not free, since every walk of the tree reads them all.
func TestHardLinksCountAgainstTheSizeLimit(t *testing.T) {
	big := strings.Repeat("b", 1000)
	entries := []entry{tfile("big", big)}
	for i := range 50 {
		entries = append(entries, thardlink(fmt.Sprintf("link%d", i), "big"))
	}
	err := ExtractTar(strings.NewReader(string(tarOf(t, entries...))), t.TempDir(), 10_000)
	expectError(t, err, permanent, []string{"maximum size of 10000"})

	// Within the limit, links are fine and the store counts each.
	dir := t.TempDir()
	if err := ExtractTar(strings.NewReader(string(tarOf(t, entries[:5]...))), dir, 10_000); err != nil {
		t.Fatal(err)
	}
	if got := entrySize(dir); got < 5*1000 {
		t.Errorf("the store counts %d bytes for five names of a 1000-byte file", got)
	}
}

// An entry being read (a Fetch or Serve holds it) is not evicted, even by
// an environment that no longer names it.
func TestStoreGCKeepsEntriesBeingRead(t *testing.T) {
	f, refs, _ := boundedStore(t, 4, 2.5, 10)
	ctx := context.Background()
	if _, err := f.Serve(ctx, "a", refs[0], nil); err != nil {
		t.Fatal(err)
	}
	f.Using("a") // a moved on, but a read of refs[0] is still under way
	name, _ := entryName(refs[0].storeKey())
	release := f.hold(name, "")
	for i := 1; i < len(refs); i++ {
		f.Using("b", refs[i])
		if _, err := f.Serve(ctx, "b", refs[i], nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := storedRefs(t, f, refs); !sameInts(got, []int{0, 3}) {
		t.Errorf("stored %v, want [0 3]: the entry being read stays", got)
	}
	release()
	f.Using("b", refs[1])
	if _, err := f.Serve(ctx, "b", refs[1], nil); err != nil {
		t.Fatal(err)
	}
	if got := storedRefs(t, f, refs); !sameInts(got, []int{1, 3}) {
		t.Errorf("stored %v, want [1 3]: once read, the unused entry goes first", got)
	}
}

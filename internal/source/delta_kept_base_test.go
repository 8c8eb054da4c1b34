package source

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/devloop-dev/devloop/internal/testfiles"
)

// A delta's base is most often the binary this process fetched whole a
// moment ago: it is read from the store, not downloaded again, also once
// the entry that first held it is gone (each entry made from a delta keeps
// its base); a kept file that is no longer the blob is downloaded.
func TestADeltasBaseTheStoreHoldsIsNotDownloadedAgain(t *testing.T) {
	repo, registry := deltaRegistry(t)
	ctx := context.Background()
	f := newFetcher(t)
	fetch := func() *Artifact {
		t.Helper()
		ref, err := f.Resolve(ctx, testNamespace, ociSource(repo, "dev", "", true))
		if err != nil {
			t.Fatal(err)
		}
		a, err := f.Fetch(ctx, ref, nil)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	dir := testfiles.Tree(t, map[string]string{"deploy/app.yaml": "kind: ConfigMap"})
	push := func(m MappedLayer) {
		t.Helper()
		img, err := PackDir(dir, nil, CompressionNone, m)
		if err != nil {
			t.Fatal(err)
		}
		if err := PushArtifact(ctx, img, repo+":dev", PushOptions{Insecure: true}); err != nil {
			t.Fatal(err)
		}
	}
	old := binaryBytes(256<<10, 3)
	whole := binaryLayer(t, old)
	push(whole)
	first := fetch()
	digest, _ := whole.Layer.Digest()
	base := &DeltaBase{Digest: digest, Tar: layerTar(t, whole.Layer)}

	rebuild := func(v string) []byte {
		next := bytes.Clone(old)
		copy(next[4000:], v)
		m := binaryLayer(t, next)
		m.Base = base
		push(m)
		return next
	}
	check := func(a *Artifact, want []byte, gets int) {
		t.Helper()
		if got, err := os.ReadFile(filepath.Join(a.Dir, "bin/server")); err != nil || !bytes.Equal(got, want) {
			t.Errorf("bin/server fetched: %d bytes, %v; want the rebuilt binary", len(got), err)
		}
		if n := registry.blobGets(t, whole.Layer); n != gets {
			t.Errorf("the base was downloaded %d times in all, want %d", n, gets)
		}
	}

	next := rebuild("version 2")
	check(fetch(), next, 1) // the whole push's fetch only

	// The whole push's entry is collected: the delta's entry kept the base.
	if err := os.RemoveAll(filepath.Dir(first.Dir)); err != nil {
		t.Fatal(err)
	}
	next = rebuild("version 3")
	third := fetch()
	check(third, next, 1)

	// The kept base no longer is the blob (changed on the volume): it is
	// downloaded, and the result is still right.
	kept := filepath.Join(filepath.Dir(third.Dir), blobFile(digest))
	if err := os.WriteFile(kept, bytes.Repeat([]byte{1}, len(base.Tar)), 0o644); err != nil {
		t.Fatal(err)
	}
	next = rebuild("version 4")
	check(fetch(), next, 2)
}

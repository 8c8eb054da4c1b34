package source

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// tightDownloads makes every download limit twice the source's size.
func tightDownloads(t *testing.T) {
	t.Helper()
	slack, interval := downloadSlack, watchInterval
	downloadSlack, watchInterval = 0, 5*time.Millisecond
	t.Cleanup(func() { downloadSlack, watchInterval = slack, interval })
}

// An OCI artifact whose layers are larger than a source may download is
// refused from its manifest, before any layer is downloaded.
func TestOCILayersAreBoundedBeforeDownload(t *testing.T) {
	tightDownloads(t)
	big := tarOf(t, tfile("a.txt", strings.Repeat("a", 10_000)))
	reg := newOCIRegistry(t, big)
	ctx := context.Background()
	f := newFetcher(t)
	f.MaxSize = 2_000
	ref, err := f.Resolve(ctx, testNamespace, ociSource(reg.repo, "dev", "", true))
	if err != nil {
		t.Fatal(err)
	}
	before := reg.requests.n.Load()
	_, err = f.Fetch(ctx, ref, nil)
	expectError(t, err, permanent, []string{"more than the 4000 a source may download"})
	// The manifest was read; no blob was.
	if n := reg.requests.n.Load() - before; n > 3 {
		t.Errorf("%d requests: a layer was downloaded", n)
	}
}

// go-git writes a pack to disk itself: a pack larger than a source may
// download is cut off while it arrives.
func TestGitPackIsBoundedWhileFetching(t *testing.T) {
	tightDownloads(t)
	r := newGitRepo(t)
	f := newFetcher(t)
	f.MaxSize = 10
	_, err := f.Fetch(context.Background(), Ref{Source: "app", Kind: KindGit, URL: r.url, Commit: r.c0}, nil)
	expectError(t, err, permanent, []string{"downloads more than 20 bytes"})

	t.Run("expanding a short SHA", func(t *testing.T) {
		_, err := f.Resolve(context.Background(), testNamespace, gitSource(r.url, &v1alpha1.GitRef{Commit: r.c0[:8]}))
		expectError(t, err, permanent, []string{"downloads more than 20 bytes"})
	})
}

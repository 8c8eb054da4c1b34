package source

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// A short SHA in the spec is expanded to the full commit when resolving,
// from the advertised refs or else a private full fetch, so the store is
// never keyed by a prefix another tenant could pre-seed.
func TestShortCommitIsExpandedAndNeverAKey(t *testing.T) {
	r := newGitRepo(t)
	f := newFetcher(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name, short, full, strategy string
	}{
		{"at a branch tip", r.c3[:7], r.c3, ""},
		{"no ref points at it", r.c0[:9], r.c0, "expand-full"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			strategy := recordStrategy(t)
			ref, err := f.Resolve(ctx, testNamespace, gitSource(r.url, &v1alpha1.GitRef{Commit: tc.short}))
			if err != nil {
				t.Fatal(err)
			}
			if ref.Commit != tc.full || ref.ID != tc.full || ref.Revision != "sha1:"+tc.full {
				t.Errorf("resolved %+v, want commit %s", ref, tc.full)
			}
			if *strategy != tc.strategy {
				t.Errorf("expanded with %q, want %q", *strategy, tc.strategy)
			}
			if _, err := f.Serve(ctx, "env-a", ref, nil); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("unknown short commit", func(t *testing.T) {
		_, err := f.Resolve(ctx, testNamespace, gitSource(r.url, &v1alpha1.GitRef{Commit: "0000000"}))
		expectError(t, err, permanent, []string{"commit 0000000 not found"})
	})
	t.Run("a short commit is never served or stored", func(t *testing.T) {
		_, err := f.Serve(ctx, "env-a", Ref{Source: "app", Kind: KindGit, URL: r.url, Commit: r.c3[:7]}, nil)
		expectError(t, err, permanent, []string{"full 40-hex"})
		if _, err := entryName("git-" + r.c3[:7]); err == nil {
			t.Error("a short SHA is a valid store key")
		}
	})
	entries, err := os.ReadDir(f.Root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == tmpDir {
			left, _ := os.ReadDir(filepath.Join(f.Root, tmpDir))
			if len(left) != 0 {
				t.Errorf("staging left behind: %v", left)
			}
			continue
		}
		if !validKey.MatchString(e.Name()) && !validKey.MatchString(replaceFirstDash(e.Name())) {
			t.Errorf("store entry %q is not a full key", e.Name())
		}
	}
}

// replaceFirstDash undoes entryName's colon mapping of a digest key.
func replaceFirstDash(name string) string {
	for i := range len(name) {
		if name[i] == '-' {
			return name[:i] + ":" + name[i+1:]
		}
	}
	return name
}

package source

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// A change's new content is filled with the environment's own credentials,
// and that fill is its access check: no manifest HEAD goes before it (a
// round trip on the path of every change). A fill the registry denies is
// the asker's answer, not remembered for the content: an environment
// without access that asks first does not hold back one with access. What
// the store holds is served to another environment only after its own
// check.
func TestAFillWithTheEnvironmentsCredentialsIsItsAccessCheck(t *testing.T) {
	var heads atomic.Int64
	ref, creds := privateArtifact(t, func(r *http.Request) {
		if r.Method == http.MethodHead && strings.Contains(r.URL.Path, "/manifests/") {
			heads.Add(1)
		}
	})
	digest, password := ref.Digest, privatePassword
	f := newFetcher(t)
	ctx := context.Background()

	// Tenant B, without credentials, asks first: denied, nothing stored.
	got, err := f.Serve(ctx, "tenant-b", ref, nil)
	expectError(t, err, permanent, []string{"manifest " + digest, "authentication required"}, password)
	if got != nil {
		t.Errorf("content served to tenant-b: %+v", got)
	}

	// Tenant A fills it: no HEAD before the fill.
	before := heads.Load()
	a, err := f.Serve(ctx, "tenant-a", ref, creds)
	if err != nil {
		t.Fatalf("tenant-a, after tenant-b was denied: %v", err)
	}
	if got := readFile(t, filepath.Join(a.Dir, "secret.txt")); got != "content" {
		t.Fatalf("secret.txt = %q", got)
	}
	if n := heads.Load() - before; n != 0 {
		t.Errorf("%d manifest HEADs before tenant-a's fill, want none: the fill is the check", n)
	}
	// Served again to A: its fill counts as a check, within its TTL.
	if _, err := f.Serve(ctx, "tenant-a", ref, creds); err != nil {
		t.Fatal(err)
	}
	if n := heads.Load() - before; n != 0 {
		t.Errorf("%d manifest HEADs serving tenant-a again", n)
	}

	// The store holds it now: B is checked, and refused.
	got, err = f.Serve(ctx, "tenant-b", ref, nil)
	expectError(t, err, permanent, []string{"access check", "manifest " + digest, "authentication required"}, password)
	if got != nil {
		t.Errorf("stored content served to tenant-b: %+v", got)
	}
	if n := heads.Load() - before; n != 1 {
		t.Errorf("%d manifest HEADs for tenant-b's check, want 1", n)
	}
}

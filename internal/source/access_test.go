package source

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// otherGitRepo is a repository with one commit of its own, as file URL.
func otherGitRepo(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "other")
	commitFiles(t, dir, map[string]string{"b.txt": "tenant c"})
	return "file://" + dir
}

// The store is shared, so an entry is served to an environment only after
// its own credentials passed the origin: one without them, or one naming
// another repository it may read, gets nothing of what another fetched.
func TestServeChecksAccessWithTheEnvironmentsOwnCredentials(t *testing.T) {
	r := newGitRepo(t)
	const user, password = "dev", "s3cret-Pa55"
	url, requests := gitHTTPServer(t, r.dir, user, password)
	ctx := context.Background()
	f := newFetcher(t)
	good := &Credentials{Username: user, Password: password, Version: "1"}
	ref := Ref{Source: "app", Kind: KindGit, URL: url, Commit: r.c0}

	a, err := f.Serve(ctx, "tenant-a", ref, good)
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(a.Dir, "a.txt")); got != "zero" {
		t.Fatalf("a.txt = %q", got)
	}

	t.Run("a positive check is remembered", func(t *testing.T) {
		before := requests.n.Load()
		if _, err := f.Serve(ctx, "tenant-a", ref, good); err != nil {
			t.Fatal(err)
		}
		if n := requests.n.Load() - before; n != 0 {
			t.Errorf("serving a checked entry again made %d requests", n)
		}
	})
	t.Run("new credentials are checked again", func(t *testing.T) {
		before := requests.n.Load()
		rotated := *good
		rotated.Version = "2"
		if _, err := f.Serve(ctx, "tenant-a", ref, &rotated); err != nil {
			t.Fatal(err)
		}
		if n := requests.n.Load() - before; n == 0 {
			t.Error("a new Secret version was not checked against the origin")
		}
	})
	t.Run("without credentials", func(t *testing.T) {
		got, err := f.Serve(ctx, "tenant-b", ref, nil)
		expectError(t, err, permanent, []string{`source "app": git ` + url, "authentication required"})
		if got != nil {
			t.Errorf("content served: %+v", got)
		}
	})
	t.Run("with wrong credentials", func(t *testing.T) {
		_, err := f.Serve(ctx, "tenant-b", ref, &Credentials{Username: user, Password: "wrong-Pa55"})
		expectError(t, err, permanent, []string{"authentication failed"}, "wrong-Pa55", password)
	})
	t.Run("another repository it may read", func(t *testing.T) {
		// Tenant C's own public repository does not hold the commit: the
		// check of C's repository proves nothing about A's entry.
		other := otherGitRepo(t)
		_, err := f.Serve(ctx, "tenant-c", Ref{Source: "app", Kind: KindGit, URL: other, Commit: r.c0}, nil)
		expectError(t, err, permanent, []string{"not found"})
	})
	t.Run("a remembered check expires", func(t *testing.T) {
		short := *f
		short.AccessTTL = time.Nanosecond
		if err := os.Rename(r.dir, r.dir+".gone"); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = os.Rename(r.dir+".gone", r.dir) }()
		_, err := short.Serve(ctx, "tenant-a", ref, good)
		expectError(t, err, permanent, []string{"access check"})
	})
}

// A pinned OCI digest another environment fetched is served only after a
// manifest HEAD with the environment's own credentials.
func TestServeChecksOCIAccessWithTheEnvironmentsOwnCredentials(t *testing.T) {
	ref, creds := privateArtifact(t)
	digest, password := ref.Digest, privatePassword
	f := newFetcher(t)
	ctx := context.Background()

	a, err := f.Serve(ctx, "tenant-a", ref, creds)
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(a.Dir, "secret.txt")); got != "content" {
		t.Fatalf("secret.txt = %q", got)
	}
	got, err := f.Serve(ctx, "tenant-b", ref, nil)
	expectError(t, err, permanent, []string{"access check", "manifest " + digest, "authentication required"}, password)
	if got != nil {
		t.Errorf("content served: %+v", got)
	}
}

// privateUser and privatePassword are what privateArtifact's registry
// accepts; no error may show the password.
const privateUser, privatePassword = "puller", "reg-Pa55word"

// privateArtifact is an artifact (secret.txt: "content") in a registry
// that answers only privateUser, the Ref that names it and the
// credentials that read it; seen sees every request to that registry.
func privateArtifact(t *testing.T, seen ...func(*http.Request)) (Ref, *Credentials) {
	t.Helper()
	open, guarded := privateRegistry(t, privateUser, privatePassword, seen...)
	digest := pushArtifact(t, open, "team-a/private", [][]byte{tarOf(t, tfile("secret.txt", "content"))}, "dev")
	auth := base64.StdEncoding.EncodeToString([]byte(privateUser + ":" + privatePassword))
	creds := &Credentials{DockerConfigJSON: []byte(fmt.Sprintf(`{"auths":{"http://%s":{"auth":%q}}}`, guarded, auth)), Version: "1"}
	return Ref{Source: "local", Kind: KindOCI, URL: guarded + "/team-a/private", Digest: digest, Insecure: true}, creds
}

// A Flux artifact's access check is its resolution: the Ref exists only
// when the environment's reader may read the Flux object, so a reader
// refused it gets no Ref to be served.
func TestFluxArtifactNeedsTheReadersAccess(t *testing.T) {
	forbidden := interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		return apierrors.NewForbidden(schema.GroupResource{Group: FluxGroup, Resource: "gitrepositories"}, key.Name, errors.New("tenant b may not"))
	}}
	f := &Fetcher{Reader: fake.NewClientBuilder().WithInterceptorFuncs(forbidden).Build(), Root: t.TempDir()}
	_, err := f.Resolve(context.Background(), testNamespace, fluxSource("GitRepository", "app"))
	expectError(t, err, permanent, []string{"forbidden"})
}

package source

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// lyingRegistry answers every manifest HEAD with digest, whatever was
// asked, and nothing else: what tenant B runs to pass an access check of
// content it does not have. gets counts the requests for anything but a
// HEAD (manifests, blobs), which it answers 404.
type lyingRegistry struct {
	host string
	gets atomic.Int64
}

func newLyingRegistry(t testing.TB, digest string) *lyingRegistry {
	t.Helper()
	l := &lyingRegistry{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v2/" || r.URL.Path == "/v2":
			w.WriteHeader(http.StatusOK)
		case r.Method == http.MethodHead && strings.Contains(r.URL.Path, "/manifests/"):
			w.Header().Set("Docker-Content-Digest", digest)
			w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
			w.Header().Set("Content-Length", "512")
			w.WriteHeader(http.StatusOK)
		default:
			l.gets.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"errors":[{"code":"MANIFEST_UNKNOWN","message":"unknown"}]}`))
		}
	}))
	t.Cleanup(srv.Close)
	l.host = hostOf(srv)
	return l
}

// Issue 31, item 1: tenant A fetched a private artifact; tenant B reads
// its digest from A's status and names it in a repository of a registry
// B runs, which answers every HEAD with that digest. B must not be served
// A's entry: the store's entry is that of A's origin, and B's origin has
// to deliver the content itself.
func TestOCIDigestNamedInAnotherRegistryIsNotServedFromTheStore(t *testing.T) {
	const user, password = "puller", "reg-Pa55word"
	open, guarded := privateRegistry(t, user, password)
	digest := pushArtifact(t, open, "team-a/private", [][]byte{tarOf(t, tfile("secret.txt", "private content"))}, "dev")
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	creds := &Credentials{DockerConfigJSON: []byte(fmt.Sprintf(`{"auths":{"http://%s":{"auth":%q}}}`, guarded, auth)), Version: "1"}
	f := newFetcher(t)
	ctx := context.Background()

	a, err := f.Serve(ctx, "tenant-a", Ref{Source: "app", Kind: KindOCI, URL: guarded + "/team-a/private", Digest: digest, Insecure: true}, creds)
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(a.Dir, "secret.txt")); got != "private content" {
		t.Fatalf("secret.txt = %q", got)
	}

	liar := newLyingRegistry(t, digest)
	got, err := f.Serve(ctx, "tenant-b", Ref{Source: "app", Kind: KindOCI, URL: liar.host + "/x", Digest: digest, Insecure: true}, nil)
	expectError(t, err, permanent, []string{`source "app": oci ` + liar.host + "/x", "manifest " + digest, "not found"})
	if got != nil {
		t.Fatalf("tenant B was served %s", got.Dir)
	}
	if liar.gets.Load() == 0 {
		t.Error("B's registry was never asked for the manifest: the content came from somewhere else")
	}
}

// The same for a Flux artifact: an entry is that of the URL it was
// downloaded from, so a Ref naming A's digest at another URL downloads
// (and verifies) from that URL.
func TestArtifactDigestNamedAtAnotherURLIsNotServedFromTheStore(t *testing.T) {
	body := gzipped(t, tarOf(t, tfile("secret.txt", "private content")))
	digest := sha256Of(body)
	srvA := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(body) }))
	t.Cleanup(srvA.Close)
	var asked atomic.Int64
	srvB := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		asked.Add(1)
		http.NotFound(w, nil)
	}))
	t.Cleanup(srvB.Close)
	f := newFetcher(t)
	ctx := context.Background()
	if _, err := f.Serve(ctx, "tenant-a", Ref{Source: "app", Kind: KindArtifact, URL: srvA.URL + "/a.tar.gz", Digest: digest}, nil); err != nil {
		t.Fatal(err)
	}
	got, err := f.Serve(ctx, "tenant-b", Ref{Source: "app", Kind: KindArtifact, URL: srvB.URL + "/b.tar.gz", Digest: digest}, nil)
	expectError(t, err, anyError, []string{"404"})
	if got != nil {
		t.Fatalf("tenant B was served %s", got.Dir)
	}
	if asked.Load() == 0 {
		t.Error("B's URL was never asked: the content came from somewhere else")
	}
}

// A source's manifest is read whole, from a registry the tenant chooses:
// one larger than maxManifestSize is refused while it is read.
func TestOCIManifestIsBounded(t *testing.T) {
	var served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.URL.Path, "/manifests/") {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
		chunk := []byte(strings.Repeat(" ", 64<<10))
		for range (64 << 20) / len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
			served.Add(int64(len(chunk)))
		}
	}))
	t.Cleanup(srv.Close)
	digest := "sha256:" + strings.Repeat("ab", 32)
	_, err := newFetcher(t).Fetch(context.Background(), Ref{Source: "big", Kind: KindOCI, URL: hostOf(srv) + "/x", Digest: digest, Insecure: true}, nil)
	expectError(t, err, permanent, []string{`source "big"`, "manifest larger than 4194304 bytes"})
	t.Logf("the registry wrote %d bytes before the operator stopped reading", served.Load())
}

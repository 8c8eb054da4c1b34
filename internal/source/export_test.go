package source

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
)

// PrivateGitServer serves a repository with one commit of files over
// smart HTTP behind basic auth as user:password, as a private repository
// on a forge, for the package's tests through the operator (package
// source_test); it returns the repository's URL and the commit.
func PrivateGitServer(t *testing.T, user, password string, files map[string]string) (url, commit string) {
	t.Helper()
	needGit(t)
	dir := filepath.Join(t.TempDir(), "private")
	commit = commitFiles(t, dir, files)
	url, _ = gitHTTPServer(t, dir, user, password)
	return url, commit
}

// PrivateRegistry pushes files as a one-layer artifact to
// team-a/private:dev on a registry that answers only user:password, for
// the package's tests through the operator; it returns the registry's
// host and the artifact's digest.
func PrivateRegistry(t *testing.T, user, password string, files map[string]string) (host, digest string) {
	t.Helper()
	open, guarded := privateRegistry(t, user, password)
	var entries []entry
	for name, body := range files {
		entries = append(entries, tfile(name, body))
	}
	digest = pushArtifact(t, open, "team-a/private", [][]byte{tarOf(t, entries...)}, "dev")
	return guarded, digest
}

// LyingRegistry runs a registry that answers every manifest HEAD with
// digest and has nothing to GET; it returns its host and how many GETs
// it was asked.
func LyingRegistry(t *testing.T, digest string) (host string, gets func() int64) {
	l := newLyingRegistry(t, digest)
	return l.host, l.gets.Load
}

// CountingRegistry is a registry over plain HTTP that counts the blob
// downloads it serves; push writes files (a path starting with / is an
// unsafe entry) as a one-layer artifact to repo:tag and returns its
// digest.
func CountingRegistry(t *testing.T) (host string, blobGets func() int64, push func(repo, tag string, files map[string]string) string) {
	t.Helper()
	var gets atomic.Int64
	inner := registry.New()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/") {
			gets.Add(1)
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	host = hostOf(srv)
	return host, gets.Load, func(repo, tag string, files map[string]string) string {
		var entries []entry
		for name, body := range files {
			entries = append(entries, tfile(name, body))
		}
		return pushArtifact(t, host, repo, [][]byte{tarOf(t, entries...)}, tag)
	}
}

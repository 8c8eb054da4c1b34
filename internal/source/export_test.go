package source

import (
	"path/filepath"
	"testing"
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

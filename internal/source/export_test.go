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

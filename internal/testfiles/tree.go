package testfiles

import (
	"os"
	"path/filepath"
	"testing"
)

// Write writes files (slash path -> content) under dir.
func Write(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		WriteFile(t, dir, p, content)
	}
}

// WriteFile writes one file (a slash path) under dir, 0644, making the
// directories it needs.
func WriteFile(t testing.TB, dir, p, content string) {
	t.Helper()
	full := filepath.Join(dir, filepath.FromSlash(p))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Tree writes files under a new temporary directory, removed with the
// test, and returns it.
func Tree(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	Write(t, dir, files)
	return dir
}

package steadystate

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/devloop-dev/devloop/internal/source"
)

// push writes files to a directory and pushes it as a one-layer OCI
// source to ref, as `kubectl devloop push` would.
func push(b *testing.B, ref string, files map[string]string) {
	b.Helper()
	dir := b.TempDir()
	for path, content := range files {
		full := filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := source.PushDir(context.Background(), dir, ref, true); err != nil {
		b.Fatalf("pushing %s: %v", ref, err)
	}
}

// Package layout checks properties of the repository's tree that the Go
// tool relies on.
package layout

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/devloop-dev/devloop/internal/testenv"
)

// TestClusterStateIsNotPartOfTheModule puts what a warm builder's cache
// volume holds (a Go module cache: packages without a go.mod, importing
// modules that are not devloop's dependencies, and a module of its own) under
// the local cluster's state directory, where the kubelet keeps pod volumes,
// and checks that `go list ./...` (the pattern `go vet` and `go test` use)
// neither lists nor fails on any of it: bin/go.mod keeps bin/ out of the
// devloop module.
func TestClusterStateIsNotPartOfTheModule(t *testing.T) {
	root, err := filepath.Abs(testenv.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(root, "bin", "cluster")
	if err := os.MkdirAll(state, 0o755); err != nil {
		t.Fatal(err)
	}
	probe, err := os.MkdirTemp(state, "go-list-probe-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(probe) })

	modcache := filepath.Join(probe, "kubelet", "pods", "uid", "volume-subpaths", "pvc-1", "build", "3", "mod")
	write(t, filepath.Join(modcache, "github.com", "davecgh", "go-spew@v1.1.1", "spew", "spew.go"),
		"package spew\n\nimport _ \"example.invalid/not/a/dependency\"\n")
	write(t, filepath.Join(modcache, "example.com", "tool@v1.0.0", "go.mod"), "module example.com/tool\n")
	write(t, filepath.Join(modcache, "example.com", "tool@v1.0.0", "main.go"), "package main\n\nfunc main() {}\n")

	cmd := exec.Command("go", "list", "-e", "-f", "{{.Dir}}\t{{if .Error}}{{.Error}}{{end}}", "./...")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list ./... failed with a Go module tree under %s: %v\n%s", state, err, out)
	}
	listed := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		dir, problem, _ := strings.Cut(line, "\t")
		listed++
		if strings.HasPrefix(dir, filepath.Join(root, "bin")+string(filepath.Separator)) {
			t.Errorf("go list ./... includes %s (under bin/)", dir)
		}
		if problem != "" {
			t.Errorf("go list ./... reports a problem in %s: %s", dir, problem)
		}
	}
	// The listing is devloop's own packages: this one among them.
	if listed < 20 || !strings.Contains(string(out), filepath.Join(root, "test", "layout")) {
		t.Fatalf("go list ./... listed %d packages, not devloop's:\n%s", listed, out)
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

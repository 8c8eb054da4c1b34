// Package cluster holds no Go code: this test runs render_test.sh, so that
// `go test ./...` (make test) checks the local cluster's config templates
// against the files the old heredocs wrote.
package cluster

import (
	"os/exec"
	"testing"
)

func TestConfigTemplatesRenderAsBefore(t *testing.T) {
	out, err := exec.Command("bash", "render_test.sh").CombinedOutput()
	if err != nil {
		t.Fatalf("render_test.sh: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

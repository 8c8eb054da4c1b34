package helper

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/internal/testfiles"
)

// TestCountPackagesStepCountsThenRunsTheCommand (issue 42): in a builder
// Job's build container the helper counts the image's Go packages'
// dependencies (go list -deps, with the build's GOFLAGS but -v), prints the
// total line the operator reads, and then becomes the build command: its
// output follows the total and its exit code is the step's.
func TestCountPackagesStepCountsThenRunsTheCommand(t *testing.T) {
	workspace, want := moduleInASubdirectory(t)

	cmd := exec.Command(os.Args[0], "count-packages", "--packages", `["./op/cmd/app"]`, "--",
		"sh", "-c", `echo "the build ran with GOFLAGS=$GOFLAGS"; exit 3`)
	cmd.Dir = workspace
	cmd.Env = append(os.Environ(), helperProcessEnv+"=1", "GOFLAGS=-v")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("step ended with %v, want the command's exit code 3\n%s", err, out)
	}
	line := fmt.Sprintf("%s %d %s\n", build.PackagesTotalPrefix, want, build.PackagesTotalSuffix)
	at, ran := strings.Index(string(out), line), strings.Index(string(out), "the build ran with GOFLAGS=-v\n")
	if at < 0 || ran < 0 || at > ran {
		t.Errorf("output %q: want %q, then the command's output with the build's environment", out, line)
	}
	if strings.Contains(string(out), "example.com/op/internal/greet\n") {
		t.Errorf("go list's packages leaked into the build output: %q", out)
	}
}

// TestCountPackagesStepRunsTheCommandWhenCountingFails: a tree go list
// cannot read (no go.mod) prints no total, and the command runs all the
// same.
func TestCountPackagesStepRunsTheCommandWhenCountingFails(t *testing.T) {
	workspace := testfiles.Tree(t, map[string]string{"cmd/app/main.go": "package main\n"})
	cmd := exec.Command(os.Args[0], "count-packages", "--packages", `["./cmd/app"]`, "--", "sh", "-c", "echo the build ran")
	cmd.Dir = workspace
	cmd.Env = append(os.Environ(), helperProcessEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("step: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "the build ran\n") || strings.Contains(string(out), build.PackagesTotalSuffix) {
		t.Errorf("output %q: want the command's output and no total", out)
	}
}

package helper

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/internal/testfiles"
)

// captureStderr runs f with os.Stderr read into the returned string: the
// run step writes the build's output there (the exec's stream).
func captureStderr(t *testing.T, f func() error) (string, error) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stderr
	os.Stderr = w
	done := make(chan string)
	go func() {
		var b bytes.Buffer
		_, _ = io.Copy(&b, r)
		done <- b.String()
	}()
	ferr := f()
	os.Stderr = saved
	w.Close()
	return <-done, ferr
}

// TestRunStepCountsTheImagesPackagesFirst (issue 42): asked to, the run
// step prints how many packages the image's Go packages need (go list
// -deps, in the module that holds them, with the build's GOFLAGS but -v)
// before the build command's own output, so the operator's message can
// say "N of M packages compiled". The total is what go list -deps says
// for the package in its module (a module in a subdirectory, as
// Dynamo's operator is).
func TestRunStepCountsTheImagesPackagesFirst(t *testing.T) {
	workspace, want := moduleInASubdirectory(t)
	if want < 3 {
		t.Fatalf("go list -deps listed %d packages", want)
	}

	fetchedAs(t, workspace, "b1")
	out, err := captureStderr(t, func() error {
		return runHelper([]string{"build", "--step", build.WarmStepRun, "--token", "b1", "--dir", workspace,
			"--command", `["sh","-c","echo the build ran"]`, "--env", `[{"name":"GOFLAGS","value":"-trimpath -v"}]`,
			"--count-packages", `["./op/cmd/app"]`})
	})
	if err != nil {
		t.Fatalf("run step: %v\n%s", err, out)
	}
	line := fmt.Sprintf("%s %d %s\n", build.PackagesTotalPrefix, want, build.PackagesTotalSuffix)
	at, ran := strings.Index(out, line), strings.Index(out, "the build ran")
	if at < 0 || ran < 0 || at > ran {
		t.Errorf("run step output %q: want %q before the build's output", out, line)
	}
	// The packages go list printed are not in the output: they would be
	// counted as compiled.
	if strings.Contains(out, "example.com/op/internal/greet\n") {
		t.Errorf("go list's packages leaked into the build output: %q", out)
	}
}

// moduleInASubdirectory is a workspace holding a Go module in op/ (as
// Dynamo's operator is) whose ./cmd/app imports a package of its own, and
// the number of packages go list -deps names for it: the total a count of
// the image's packages must print. It skips without a go command.
func moduleInASubdirectory(t *testing.T) (string, int) {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	workspace := testfiles.Tree(t, map[string]string{
		"op/go.mod":              "module example.com/op\n\ngo 1.22\n",
		"op/cmd/app/main.go":     "package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/op/internal/greet\"\n)\n\nfunc main() { fmt.Println(greet.Hello()) }\n",
		"op/internal/greet/g.go": "package greet\n\nimport \"strings\"\n\nfunc Hello() string { return strings.ToUpper(\"hi\") }\n",
	})
	list := exec.Command("go", "list", "-deps", "./cmd/app")
	list.Dir = filepath.Join(workspace, "op")
	listed, err := list.Output()
	if err != nil {
		t.Fatal(err)
	}
	return workspace, len(strings.Fields(string(listed)))
}

package helper

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/internal/image"
	"github.com/devloop-dev/devloop/internal/testfiles"
	"github.com/devloop-dev/devloop/internal/testregistry"
)

// captureStdout runs f with os.Stdout going to a buffer.
func captureStdout(t *testing.T, f func() error) (string, error) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdout
	os.Stdout = w
	done := make(chan string)
	go func() {
		var b bytes.Buffer
		_, _ = io.Copy(&b, r)
		done <- b.String()
	}()
	ferr := f()
	os.Stdout = saved
	w.Close()
	return <-done, ferr
}

// runSteps runs the helper for each of a warm build's steps, as the
// exec'd commands would, in workspace; it returns the last step's stdout
// and the first error.
func runSteps(t *testing.T, steps []build.WarmStep, workspace string) (string, error) {
	t.Helper()
	var stdout string
	for _, step := range steps {
		out, err := captureStdout(t, func() error { return runHelper(inTestDirs(t, step.Command[2:], workspace)) })
		if err != nil {
			return out, err
		}
		stdout = out
	}
	return stdout, nil
}

// inTestDirs points a step's --dir at workspace and its --state (the
// agent's own volume) at a directory beside it, as the pod mounts them.
func inTestDirs(t *testing.T, args []string, workspace string) []string {
	t.Helper()
	state := workspace + ".agent-state"
	if err := os.MkdirAll(state, 0o755); err != nil {
		t.Fatal(err)
	}
	return withFlag(withFlag(args, "--dir", workspace), "--state", state)
}

// TestHelperBuildInAWarmWorkspace runs the helper with the steps
// WarmBuildSteps gives a warm builder: the previous build's files are
// cleared, the resolved source fetched, the command run there, the image
// pushed and reported as the last line of stdout; a failing command gives
// its own exit code; a step of a build whose workspace another build has
// fetched into since is refused.
func TestHelperBuildInAWarmWorkspace(t *testing.T) {
	host, ref := pushedSource(t, map[string]string{"main.txt": "v2"})
	// What the previous build left.
	workspace := testfiles.Tree(t, map[string]string{"stale.txt": "old", "out/app": "old"})

	req := build.JobRequest{
		Source: ref, Platform: "linux/amd64",
		Image: image.Spec{Name: "app", Layers: []v1alpha1.LayerMapping{{From: "out/app", To: "/app", Mode: "0755"}}, Entrypoint: []string{"/app"}},
		Run: v1alpha1.BuildRun{Image: "golang", KeepWarm: true,
			Command: []string{"sh", "-c", "test ! -e stale.txt && mkdir -p out && cp main.txt out/app"}},
		Registry: image.Registry{Prefix: host + "/team", Insecure: true},
	}
	claimAs(t, workspace, "build1")
	steps, err := build.WarmBuildSteps(req, "build1")
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := runSteps(t, steps, workspace)
	if err != nil {
		t.Fatalf("helper build: %v", err)
	}
	var report build.AssembleReport
	if err := json.Unmarshal([]byte(strings.TrimSpace(stdout)), &report); err != nil {
		t.Fatalf("stdout %q is not a report: %v", stdout, err)
	}
	// The reported digest is in the registry.
	testregistry.Pull(t, host+"/team/app@"+report.Digest)
	if got, err := os.ReadFile(filepath.Join(workspace, "out", "app")); err != nil || string(got) != "v2" {
		t.Errorf("out/app = %q, %v; want the new build's output", got, err)
	}
	if _, err := os.Stat(filepath.Join(workspace, ".devloop-lock")); err != nil {
		t.Errorf("the workspace lock is gone: %v", err)
	}

	// A command that fails: its exit code, no report.
	req.Run.Command = []string{"sh", "-c", "echo 'main.go:1: syntax error' >&2; exit 3"}
	claimAs(t, workspace, "build2")
	steps, err = build.WarmBuildSteps(req, "build2")
	if err != nil {
		t.Fatal(err)
	}
	stdout, err = runSteps(t, steps, workspace)
	var code ExitError
	if !errors.As(err, &code) || code.Code != 3 {
		t.Fatalf("failing command: err %v, want exit code 3", err)
	}
	if strings.TrimSpace(stdout) != "" {
		t.Errorf("a failed build printed %q on stdout", stdout)
	}

	// Build 3 claims and fetches while build 2's later steps wait: they
	// are refused.
	claimAs(t, workspace, "build3")
	other, err := build.WarmBuildSteps(req, "build3")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runSteps(t, other[:1], workspace); err != nil {
		t.Fatal(err)
	}
	if _, err := runSteps(t, steps[2:], workspace); err == nil || !strings.Contains(err.Error(), "a newer one claimed it") {
		t.Errorf("push of a superseded build: err %v, want refused", err)
	}
}

// TestHelperBuildStopsTheCommandAtItsTimeout: the run step kills the build
// command at --timeout itself (an exec'd process may outlive its stream).
func TestHelperBuildStopsTheCommandAtItsTimeout(t *testing.T) {
	workspace := t.TempDir()
	fetchedAs(t, workspace, "b1")
	start := time.Now()
	err := runHelper([]string{"build", "--step", build.WarmStepRun, "--token", "b1", "--dir", workspace,
		"--command", `["sleep","30"]`, "--timeout", "200ms"})
	if err == nil {
		t.Fatal("a command past its timeout succeeded")
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("the command ran %s past a 200ms timeout", d)
	}
}

// claimAs claims workspace for the build token, as its claim step does.
func claimAs(t *testing.T, workspace, token string) {
	t.Helper()
	if _, err := claimBuild(workspace, "key-"+token, token, time.Now()); err != nil {
		t.Fatal(err)
	}
}

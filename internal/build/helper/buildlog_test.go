package helper

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/devloop-dev/devloop/internal/build"
)

// runStep runs a warm build's run step in workspace, as the exec would.
func runStep(t *testing.T, workspace, token, command, buildLog string) error {
	t.Helper()
	fetchedAs(t, workspace, token)
	return runHelper([]string{"build", "--step", build.WarmStepRun, "--token", token, "--dir", workspace,
		"--command", command, "--build-log", buildLog})
}

// TestWarmBuildOutputReachesTheContainerLog: what the build command
// prints (stdout and stderr) comes out of the idle process's stdout — the
// warm builder's container log — line by line as it is written, with a
// line of devloop's before and after each build; a build whose log pipe
// has no reader, or no pipe at all, runs as before.
func TestWarmBuildOutputReachesTheContainerLog(t *testing.T) {
	dir := t.TempDir()
	pipe := filepath.Join(dir, "build-log")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := serveBuildLog(pipe, w); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	expectLines := func(want ...string) {
		t.Helper()
		for _, line := range want {
			select {
			case got := <-lines:
				if got != line {
					t.Fatalf("container log line %q, want %q", got, line)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("container log: no line %q", line)
			}
		}
	}

	workspace := t.TempDir()
	if err := runStep(t, workspace, "b1", `["sh","-c","echo compiling pkg/scheduler; echo 'warning: unused' >&2"]`, pipe); err != nil {
		t.Fatalf("run step: %v", err)
	}
	expectLines(
		`devloop: build b1: running [sh -c echo compiling pkg/scheduler; echo 'warning: unused' >&2]`,
		"compiling pkg/scheduler",
		"warning: unused",
		"devloop: build b1: the build command succeeded",
	)

	// The next build goes to the same log, failure and all.
	if err := runStep(t, workspace, "b2", `["sh","-c","echo 'main.go:1: syntax error'; exit 3"]`, pipe); err == nil {
		t.Fatal("a failing command succeeded")
	}
	expectLines(
		`devloop: build b2: running [sh -c echo 'main.go:1: syntax error'; exit 3]`,
		"main.go:1: syntax error",
		"devloop: build b2: exit status 3",
	)

	// A pipe nobody reads, and no pipe: the build runs and succeeds.
	orphan := filepath.Join(dir, "orphan")
	if err := syscall.Mkfifo(orphan, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, log := range []string{orphan, filepath.Join(dir, "missing")} {
		start := time.Now()
		if err := runStep(t, workspace, "b3", `["sh","-c","echo ok"]`, log); err != nil {
			t.Errorf("build log %s: %v", log, err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("build log %s: the step took %s", log, d)
		}
	}
	select {
	case got := <-lines:
		if strings.Contains(got, "b3") {
			t.Errorf("build b3 wrote %q to another build log", got)
		}
	default:
	}
}

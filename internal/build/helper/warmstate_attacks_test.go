package helper

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/internal/image"
	"github.com/devloop-dev/devloop/internal/testfiles"
	"github.com/devloop-dev/devloop/internal/testregistry"
)

// The build command (the author's code) writes into the workspace while
// the agent, which holds the credentials and the workspace lock, reads
// the builds' state there. These are its attacks on that reader (issue
// 44).

// returnsSoon fails the test unless f returns within a bound far above
// any honest read: a reader that blocks would hold the workspace lock for
// ever.
func returnsSoon(t *testing.T, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s blocked", what)
		return nil
	}
}

// unblockFIFO opens path for writing, so a reader blocked on it returns
// (cleanup after a failed test).
func unblockFIFO(path string) {
	if fd, err := syscall.Open(path, syscall.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
		_ = syscall.Close(fd)
	}
}

// TestWarmStateRefusesAFIFO: a named pipe planted as a state file or as
// the workspace's build token is refused at once, not waited on.
func TestWarmStateRefusesAFIFO(t *testing.T) {
	workspace := t.TempDir()
	fetchedAs(t, workspace, "t1")
	result := statePath(workspace, resultName("t1", build.WarmStepRun))
	if err := syscall.Mkfifo(result, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unblockFIFO(result) })
	var r stepResult
	err := returnsSoon(t, "reading a FIFO as a state file", func() error {
		_, err := readState(workspace, resultName("t1", build.WarmStepRun), &r)
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a FIFO as a state file: err %v, want refused", err)
	}

	token := filepath.Join(workspace, buildTokenFile)
	if err := os.Remove(token); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(token, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unblockFIFO(token) })
	if err := returnsSoon(t, "reading a FIFO as the build token", func() error { return checkBuildToken(workspace, "t1") }); err == nil {
		t.Error("a FIFO as the build token was accepted")
	}
}

// TestWarmStateDirectorySwappedForASymlinkIsNeverRead: the build command
// swaps the state directory and a symlink to a directory of its own, over
// and over, while the agent reads the claim: whichever moment the swap
// hits, the agent never reads the planted claim (openat from the
// directory it opened, not a path looked up again).
func TestWarmStateDirectorySwappedForASymlinkIsNeverRead(t *testing.T) {
	workspace := t.TempDir()
	fetchedAs(t, workspace, "real")
	planted := t.TempDir()
	data, err := json.Marshal(buildClaim{Key: "k", Token: "planted"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(planted, claimFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(workspace, "swap")
	if err := os.Symlink(planted, link); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(workspace, stateDir)
	stop := make(chan struct{})
	swapped := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				swapped <- n
				return
			default:
			}
			if err := unix.Renameat2(unix.AT_FDCWD, state, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE); err == nil {
				n++
			}
		}
	}()
	read := 0
	for range 20000 {
		var c buildClaim
		ok, err := readState(workspace, claimFile, &c)
		if ok && err == nil {
			read++
		}
		if c.Token == "planted" {
			close(stop)
			<-swapped
			t.Fatal("the agent read a claim through a state directory swapped for a symlink")
		}
	}
	close(stop)
	if n := <-swapped; n == 0 {
		t.Fatal("the directory was never swapped: the test tried nothing")
	}
	if read == 0 {
		t.Error("the real claim was never read")
	}
}

// TestWarmPushResultPlantedByTheBuildCommandIsNotAnswered: the build
// command writes a push result for its own build into the workspace's
// state; the push step does not answer it as if the agent had pushed, but
// pushes and reports what it pushed (its state is on a volume only the
// agent mounts).
func TestWarmPushResultPlantedByTheBuildCommandIsNotAnswered(t *testing.T) {
	host, ref := pushedSource(t, map[string]string{"main.txt": "v1"})
	workspace := testfiles.Tree(t, nil)
	planted := `{"report":"{\"digest\":\"sha256:0000000000000000000000000000000000000000000000000000000000000000\"}"}`
	req := build.JobRequest{
		Source: ref, Platform: "linux/amd64",
		Image: image.Spec{Name: "app", Layers: []v1alpha1.LayerMapping{{From: "out/app", To: "/app", Mode: "0755"}}, Entrypoint: []string{"/app"}},
		Run: v1alpha1.BuildRun{Image: "golang", KeepWarm: true, Command: []string{"sh", "-c",
			"mkdir -p out && cp main.txt out/app && mkdir -p .devloop-state && printf '%s' '" + planted + "' > .devloop-state/result-$(cat .devloop-build)-push.json"}},
		Registry: image.Registry{Prefix: host + "/team", Insecure: true},
	}
	claimAs(t, workspace, "b1")
	steps, err := build.WarmBuildSteps(req, "b1")
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
	if strings.HasPrefix(report.Digest, "sha256:0000") {
		t.Fatalf("the push step answered the planted result: %s", stdout)
	}
	testregistry.Pull(t, host+"/team/app@"+report.Digest)
}

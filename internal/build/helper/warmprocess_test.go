package helper

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/internal/image"
	"github.com/devloop-dev/devloop/internal/testregistry"
)

// helperProcessEnv makes the test binary run one helper step as its own
// process (TestMain): the warm build's processes are real, with their own
// pids and process groups, and can be killed as in a warm builder.
const helperProcessEnv = "DEVLOOP_TEST_HELPER_PROCESS"

func TestMain(m *testing.M) {
	if os.Getenv(helperProcessEnv) == "1" {
		err := Run(context.Background(), os.Args[1:])
		var code ExitError
		switch {
		case errors.As(err, &code):
			fmt.Fprintln(os.Stderr, err)
			os.Exit(code.Code)
		case err != nil:
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// helperProcess is a step of a warm build started as a process of its own
// in workspace, as an exec into the warm builder starts it.
type helperProcess struct {
	cmd    *exec.Cmd
	stdout bytes.Buffer
	stderr bytes.Buffer
	done   chan error
}

func startStep(t *testing.T, step build.WarmStep, workspace string) *helperProcess {
	t.Helper()
	p := &helperProcess{done: make(chan error, 1)}
	p.cmd = exec.Command(os.Args[0], inTestDirs(t, step.Command[2:], workspace)...)
	p.cmd.Env = append(os.Environ(), helperProcessEnv+"=1")
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		p.done <- nil
	})
	return p
}

// wait is the step's exit code (-1 killed) once it ends, within a minute.
func (p *helperProcess) wait(t *testing.T) int {
	t.Helper()
	select {
	case err := <-p.done:
		p.done <- err
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(time.Minute):
		t.Fatalf("step %v still runs after a minute; stderr:\n%s", p.cmd.Args, p.stderr.String())
		return 0
	}
}

// runStepProcess runs a step as its own process to its end.
func runStepProcess(t *testing.T, step build.WarmStep, workspace string) (stdout string, code int) {
	t.Helper()
	p := startStep(t, step, workspace)
	code = p.wait(t)
	return p.stdout.String(), code
}

func claim(t *testing.T, workspace, key, token string) build.WarmClaim {
	t.Helper()
	out, code := runStepProcess(t, build.WarmClaimStep(key, token), workspace)
	var c build.WarmClaim
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &c); code != 0 || err != nil {
		t.Fatalf("claim %s: exit %d, stdout %q (%v)", token, code, out, err)
	}
	return c
}

// waitForRun waits until token's build command runs and returns its
// record.
func waitForRun(t *testing.T, workspace, token string) runRecord {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		var r runRecord
		if ok, _ := readState(workspace, runFile, &r); ok && r.Token == token {
			return r
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("build %s's command never started", token)
	return runRecord{}
}

func warmRequest(host string, command string) build.JobRequest {
	return build.JobRequest{
		Platform: "linux/amd64",
		Image:    image.Spec{Name: "app", Layers: []v1alpha1.LayerMapping{{From: "out/app", To: "/app", Mode: "0755"}}, Entrypoint: []string{"/app"}},
		Run:      v1alpha1.BuildRun{Image: "golang", KeepWarm: true, Command: []string{"sh", "-c", command}},
		Registry: image.Registry{Prefix: host + "/team", Insecure: true},
	}
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(data), "\n")
}

// TestWarmBuildAdoptedAfterAnOperatorRestart: the operator dies while a
// warm build's command runs (its exec streams are gone, the processes go
// on); the restarted operator execs the build of the same inputs again.
// The claim adopts the running build with its original start, the fetch
// is not done again, the run step waits for the running command and
// answers its result, and the command ran exactly once.
func TestWarmBuildAdoptedAfterAnOperatorRestart(t *testing.T) {
	host, ref := pushedSource(t, map[string]string{"main.txt": "v2"})
	workspace := t.TempDir()
	starts := filepath.Join(t.TempDir(), "starts")
	req := warmRequest(host, "echo started >> "+starts+"; sleep 2; mkdir -p out; cp main.txt out/app")
	req.Source = ref

	first := claim(t, workspace, "pod1/inputs1", "t1")
	steps, err := build.WarmBuildSteps(req, first.Token)
	if err != nil {
		t.Fatal(err)
	}
	if _, code := runStepProcess(t, steps[0], workspace); code != 0 {
		t.Fatalf("fetch: exit %d", code)
	}
	orphan := startStep(t, steps[1], workspace)
	waitForRun(t, workspace, "t1")

	// The restarted operator, with a token of its own.
	again := claim(t, workspace, "pod1/inputs1", "t2")
	if again.Token != "t1" || !again.Started.Equal(first.Started) {
		t.Fatalf("claim after the restart = %+v, want build t1 adopted with its start %s", again, first.Started)
	}
	steps, err = build.WarmBuildSteps(req, again.Token)
	if err != nil {
		t.Fatal(err)
	}
	if _, code := runStepProcess(t, steps[0], workspace); code != 0 {
		t.Fatalf("fetch again: exit %d", code)
	}
	if _, code := runStepProcess(t, steps[1], workspace); code != 0 {
		t.Fatalf("run again: exit %d", code)
	}
	stdout, code := runStepProcess(t, steps[2], workspace)
	if code != 0 {
		t.Fatalf("push: exit %d", code)
	}
	if code := orphan.wait(t); code != 0 {
		t.Errorf("the first exec of the run step: exit %d, want 0 (not killed)", code)
	}
	if n := countLines(t, starts); n != 1 {
		t.Errorf("the build command ran %d times, want once", n)
	}
	var report build.AssembleReport
	if err := json.Unmarshal([]byte(strings.TrimSpace(stdout)), &report); err != nil || report.Digest == "" {
		t.Fatalf("push stdout %q: %v", stdout, err)
	}
	// Pushed again, the push answers the same report without pushing.
	if again, _ := runStepProcess(t, steps[2], workspace); again != stdout {
		t.Errorf("push exec'd again printed %q, want %q", again, stdout)
	}
	fmt.Printf("build started %s, adopted by the second claim with the same start\n", first.Started.Format(time.RFC3339Nano))
}

// TestWarmBuildTimedOutLeavesNoProcess: the run step stops the command at
// the timeout, counted from the build's claim, with all it started (two
// background sleeps in its process group), before it answers; the
// operator is told a timeout (WarmExitTimedOut), not the command's code.
func TestWarmBuildTimedOutLeavesNoProcess(t *testing.T) {
	workspace := t.TempDir()
	c := claim(t, workspace, "pod1/inputs1", "t1")
	if err := os.WriteFile(filepath.Join(workspace, buildTokenFile), []byte(c.Token), 0o644); err != nil {
		t.Fatal(err)
	}
	run := build.WarmStep{Name: build.WarmStepRun, Container: build.ContainerWarm, Command: []string{build.WarmHelper, "helper",
		"build", "--step", build.WarmStepRun, "--token", "t1", "--dir", workspace,
		"--command", `["sh","-c","sleep 600 & sleep 600 & wait"]`, "--timeout", "2s"}}
	p := startStep(t, run, workspace)
	rec := waitForRun(t, workspace, "t1")
	if !groupAlive(rec.Pgid) {
		t.Fatal("the build command's group is not running")
	}
	if code := p.wait(t); code != build.WarmExitTimedOut {
		t.Fatalf("run step past its timeout: exit %d, want %d; stderr:\n%s", code, build.WarmExitTimedOut, p.stderr.String())
	}
	if groupAlive(rec.Pgid) {
		t.Errorf("the timed-out build's processes (group %d) still run after its run step ended", rec.Pgid)
	}
	// The next attempt at the same inputs is a new build: the failed one
	// is not adopted.
	if next := claim(t, workspace, "pod1/inputs1", "t2"); next.Token != "t2" {
		t.Errorf("claim after a timed-out build = %+v, want a new build t2", next)
	}
}

// TestWarmBuildSupersededOutputNeverLandsInTheNextImage: an orphaned
// build of older inputs still compiles (its operator is gone) when a
// build of newer inputs claims the warm builder. The claim kills the old
// build's processes and waits for them, so the old command never writes
// its output; the new build's image holds only its own; the old build's
// later steps are refused.
func TestWarmBuildSupersededOutputNeverLandsInTheNextImage(t *testing.T) {
	host, ref := pushedSource(t, map[string]string{"main.txt": "new"})
	workspace := t.TempDir()

	// The old build: its command writes "old" as its output after a
	// while, then keeps running.
	old := warmRequest(host, "sleep 3; mkdir -p out; echo old > out/app; sleep 600")
	old.Source = ref
	claim(t, workspace, "pod1/inputs1", "old")
	oldSteps, err := build.WarmBuildSteps(old, "old")
	if err != nil {
		t.Fatal(err)
	}
	if _, code := runStepProcess(t, oldSteps[0], workspace); code != 0 {
		t.Fatalf("old fetch: exit %d", code)
	}
	orphan := startStep(t, oldSteps[1], workspace)
	rec := waitForRun(t, workspace, "old")
	if !runStepAlive(rec) || !groupAlive(rec.Pgid) {
		t.Fatal("the old build is not running")
	}

	c := claim(t, workspace, "pod1/inputs2", "new")
	if c.Token != "new" {
		t.Fatalf("claim of newer inputs = %+v, want build new", c)
	}
	if groupAlive(rec.Pgid) || runStepAlive(rec) {
		t.Fatalf("the claim returned while the old build's processes (group %d) still run", rec.Pgid)
	}
	if code := orphan.wait(t); code == 0 {
		t.Error("the old run step succeeded, want it killed")
	}

	newReq := warmRequest(host, "mkdir -p out; cp main.txt out/app")
	newReq.Source = ref
	steps, err := build.WarmBuildSteps(newReq, "new")
	if err != nil {
		t.Fatal(err)
	}
	var stdout string
	for _, step := range steps {
		out, code := runStepProcess(t, step, workspace)
		if code != 0 {
			t.Fatalf("new build, step %s: exit %d", step.Name, code)
		}
		stdout = out
	}
	var report build.AssembleReport
	if err := json.Unmarshal([]byte(strings.TrimSpace(stdout)), &report); err != nil {
		t.Fatalf("push stdout %q: %v", stdout, err)
	}
	img := testregistry.Pull(t, host+"/team/app@"+report.Digest)
	if got := fileIn(t, img, "app"); got != "new\n" && got != "new" {
		t.Errorf("the new image's /app = %q, want the new build's output", got)
	}

	// The old build's steps, exec'd again by whatever still holds its
	// token, write nothing.
	if out, code := runStepProcess(t, oldSteps[2], workspace); code == 0 {
		t.Errorf("push of the superseded build succeeded: %q", out)
	}
	if _, code := runStepProcess(t, oldSteps[1], workspace); code == 0 {
		t.Error("run step of the superseded build ran")
	}
	if got, err := os.ReadFile(filepath.Join(workspace, "out", "app")); err != nil || string(got) != "new" {
		t.Errorf("workspace out/app = %q, %v; want the new build's", got, err)
	}
}

// fileIn is the content of path in img's flattened file system.
func fileIn(t *testing.T, img v1.Image, path string) string {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s not in the image: %v", path, err)
		}
		if strings.TrimPrefix(h.Name, "/") == path {
			var b bytes.Buffer
			if _, err := b.ReadFrom(tr); err != nil {
				t.Fatal(err)
			}
			return b.String()
		}
	}
}

// fetchedAs leaves workspace as the fetch step of the claimed build token
// would: claimed, and holding its source.
func fetchedAs(t *testing.T, workspace, token string) {
	t.Helper()
	if _, err := claimBuild(workspace, "key-"+token, token, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(workspace, buildTokenFile), []byte(token), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestWarmStateRefusesWhatTheBuildCommandPlanted: the build command (the
// author's code) can write into the workspace, the builds' state
// included. The agent's steps, which hold the credentials, neither follow
// a symlink planted there (to a mounted Secret) nor read an unbounded
// file.
func TestWarmStateRefusesWhatTheBuildCommandPlanted(t *testing.T) {
	workspace := t.TempDir()
	fetchedAs(t, workspace, "t1")
	secret := filepath.Join(t.TempDir(), ".dockerconfigjson")
	if err := os.WriteFile(secret, []byte(`{"report":"the secret"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// A push result that is a symlink to the Secret.
	if err := os.Symlink(secret, statePath(workspace, resultName("t1", build.WarmStepPush))); err != nil {
		t.Fatal(err)
	}
	var r stepResult
	if ok, err := readState(workspace, resultName("t1", build.WarmStepPush), &r); err == nil || ok || r.Report != "" {
		t.Errorf("read through a planted symlink: ok %v, err %v, report %q", ok, err, r.Report)
	}
	// A temporary file planted as a symlink is replaced, not written
	// through.
	if err := os.Symlink(secret, statePath(workspace, resultName("t1", build.WarmStepRun)+".tmp")); err != nil {
		t.Fatal(err)
	}
	if err := writeState(workspace, resultName("t1", build.WarmStepRun), stepResult{ExitCode: 2}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(secret); string(got) != `{"report":"the secret"}` {
		t.Errorf("the Secret was written through a planted symlink: %q", got)
	}
	// A huge claim file is refused, not read whole.
	if err := os.WriteFile(statePath(workspace, claimFile), bytes.Repeat([]byte(" "), maxStateBytes+10), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := claimedBy(workspace, "t1"); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("oversized claim: err %v, want refused", err)
	}
	// The state directory itself replaced by a symlink.
	if err := os.RemoveAll(filepath.Join(workspace, stateDir)); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(secret), filepath.Join(workspace, stateDir)); err != nil {
		t.Fatal(err)
	}
	if _, err := readState(workspace, ".dockerconfigjson", &r); err == nil {
		t.Error("read through a state directory that is a symlink")
	}
}

package helper

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A warm builder's workspace keeps, besides the source, what its builds
// are: which build is claimed (one at a time), which process runs the
// build command, and how each finished step of the claimed build ended.
// The operator may die at any line and exec a step again; the state lets
// the helper answer the step again without running it twice, and lets the
// next build kill what an earlier one left running before it fetches.
const (
	// stateDir is kept when the workspace is cleared.
	stateDir = ".devloop-state"
	// claimFile is the claimed build (buildClaim).
	claimFile = "build.json"
	// runFile is the running build command (runRecord), written in the
	// build container's process namespace.
	runFile = "run.json"
)

// buildClaim is the build the workspace belongs to: Key names its inputs
// (the operator's pod UID and inputs hash), Token this attempt at them,
// Started when it was claimed: the start every timeout counts from.
type buildClaim struct {
	Key     string    `json:"key"`
	Token   string    `json:"token"`
	Started time.Time `json:"started"`
}

// runRecord is the run step that runs the build command: Pid the helper,
// Pgid the command's process group (the command and all it started).
type runRecord struct {
	Token string `json:"token"`
	Pid   int    `json:"pid"`
	Pgid  int    `json:"pgid"`
}

// stepResult is how a step of a build ended, kept so that the step exec'd
// again with the same token answers the same: Report is the push step's
// stdout line; ExitCode the build command's (0: another error, in Err).
type stepResult struct {
	Err      string `json:"err,omitempty"`
	ExitCode int    `json:"exitCode,omitempty"`
	TimedOut bool   `json:"timedOut,omitempty"`
	Report   string `json:"report,omitempty"`
}

func statePath(dir, name string) string { return filepath.Join(dir, stateDir, name) }

func resultName(token, step string) string { return "result-" + token + "-" + step + ".json" }

// maxStateBytes bounds a state file read: the build command, the
// author's code, can write into the workspace, the state included.
const maxStateBytes = 64 << 10

// stateDirChecked refuses a state directory that is not one (a symlink
// the build command left there would send the agent's reads and writes,
// which hold the credentials, elsewhere).
func stateDirChecked(dir string) error {
	fi, err := os.Lstat(filepath.Join(dir, stateDir))
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", stateDir)
	}
	return nil
}

// readState reads a state file into v; a missing file is (false, nil).
// Symlinks are not followed and the read is bounded.
func readState(dir, name string, v any) (bool, error) {
	if err := stateDirChecked(dir); errors.Is(err, os.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	f, err := os.OpenFile(statePath(dir, name), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxStateBytes+1))
	if err != nil {
		return false, err
	}
	if len(data) > maxStateBytes {
		return false, fmt.Errorf("%s: larger than %d bytes", name, maxStateBytes)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, fmt.Errorf("%s: not a state file", name)
	}
	return true, nil
}

// writeState writes v to a state file at once (rename): a reader never
// sees half of it. The temporary file is created anew, never opened
// through a symlink.
func writeState(dir, name string, v any) error {
	if err := os.Mkdir(filepath.Join(dir, stateDir), 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	if err := stateDirChecked(dir); err != nil {
		return err
	}
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := statePath(dir, name+".tmp")
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, statePath(dir, name))
}

// claimedBy fails unless token is the workspace's claimed build: a step
// of a superseded build writes nothing.
func claimedBy(dir, token string) (buildClaim, error) {
	var c buildClaim
	ok, err := readState(dir, claimFile, &c)
	if err != nil {
		return c, err
	}
	if !ok || c.Token != token {
		return c, errors.New("this build is no longer the warm builder's current build (a newer one claimed it)")
	}
	return c, nil
}

// failedBuild reports whether a step of token's build ended in failure.
func failedBuild(dir, token string) bool {
	for _, step := range []string{"run", "push"} {
		var r stepResult
		if ok, _ := readState(dir, resultName(token, step), &r); ok && (r.Err != "" || r.ExitCode != 0) {
			return true
		}
	}
	return false
}

// claimBuild makes the build (key, token) the workspace's, or adopts the
// one already claimed for the same key that has not failed: a restarted
// operator goes on with the build it started, which keeps its start. Any
// other build's command still running is killed first, its whole process
// group, and waited for: nothing it writes can reach the next build. It
// returns the claim the operator goes on with.
func claimBuild(dir, key, token string, now time.Time) (buildClaim, error) {
	var cur buildClaim
	ok, err := readState(dir, claimFile, &cur)
	if err != nil {
		return cur, err
	}
	if ok && cur.Key == key && !failedBuild(dir, cur.Token) {
		return cur, nil
	}
	if err := stopRun(dir, ""); err != nil {
		return cur, err
	}
	next := buildClaim{Key: key, Token: token, Started: now.UTC()}
	if err := writeState(dir, claimFile, next); err != nil {
		return next, err
	}
	forgetResults(dir, token)
	return next, nil
}

// forgetResults removes the results of builds other than token's: the
// state holds one build's.
func forgetResults(dir, token string) {
	entries, _ := os.ReadDir(filepath.Join(dir, stateDir))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "result-") && !strings.HasPrefix(e.Name(), "result-"+token+"-") {
			_ = os.Remove(filepath.Join(dir, stateDir, e.Name()))
		}
	}
}

// stopWait bounds the wait for a killed build to be gone.
const stopWait = 30 * time.Second

// stopRun kills the recorded build command, unless it is keep's, with its
// process group and its run step, and waits until they are gone.
func stopRun(dir, keep string) error {
	var r runRecord
	ok, err := readState(dir, runFile, &r)
	if err != nil || !ok || r.Token == keep {
		return err
	}
	// The run step first: it writes nothing more of its build.
	if runStepAlive(r) {
		_ = syscall.Kill(r.Pid, syscall.SIGKILL)
	}
	if r.Pgid > 0 {
		_ = syscall.Kill(-r.Pgid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(stopWait)
	for runStepAlive(r) || groupAlive(r.Pgid) {
		if time.Now().After(deadline) {
			return fmt.Errorf("build %s's processes (group %d) are still running %s after being killed", r.Token, r.Pgid, stopWait)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return os.Remove(statePath(dir, runFile))
}

// runStepAlive reports whether r's run step still runs: its pid is a
// process whose command line names its token (not a pid reused since).
func runStepAlive(r runRecord) bool {
	if r.Pid <= 0 {
		return false
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(r.Pid) + "/cmdline")
	if err != nil {
		return false
	}
	if zombie(r.Pid) {
		return false
	}
	return bytes.Contains(cmdline, []byte("\x00"+r.Token+"\x00")) || bytes.HasSuffix(cmdline, []byte("\x00"+r.Token))
}

// groupAlive reports whether a process of group pgid still runs (a zombie
// waiting for its parent does not).
func groupAlive(pgid int) bool {
	if pgid <= 0 {
		return false
	}
	if err := syscall.Kill(-pgid, 0); err != nil {
		return false
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if g, err := syscall.Getpgid(pid); err == nil && g == pgid && !zombie(pid) {
			return true
		}
	}
	return false
}

// zombie reports a process that has exited and waits to be reaped.
func zombie(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// The state follows the command name in parentheses.
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] == 'Z'
	}
	return false
}

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

// The build command can rewrite the workspace, the state directory
// included, at any moment: the state is read and written relative to the
// directory opened once, not followed through a symlink (openat), never a
// path looked up again, so a symlink swapped in after a check leads
// nowhere; a file is opened without blocking and read only if it is a
// regular one, so a FIFO planted there cannot hold the agent (and the
// workspace lock) waiting.

// openStateDir opens dir's state directory, not through a symlink; with
// create it is made first when missing.
func openStateDir(dir string, create bool) (int, error) {
	path := filepath.Join(dir, stateDir)
	if create {
		if err := os.Mkdir(path, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return -1, err
		}
	}
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.ENOTDIR) {
		return -1, fmt.Errorf("%s is not a directory", stateDir)
	}
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return fd, nil
}

// openRegularAt opens name in the directory dirfd with flags, not through
// a symlink and without blocking, and refuses what is not a regular file.
func openRegularAt(dirfd int, name string, flags int, perm uint32) (*os.File, error) {
	fd, err := syscall.Openat(dirfd, name, flags|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, perm)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		_ = syscall.Close(fd)
		return nil, &os.PathError{Op: "stat", Path: name, Err: err}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		_ = syscall.Close(fd)
		return nil, fmt.Errorf("%s: not a regular file", name)
	}
	return os.NewFile(uintptr(fd), name), nil
}

// readAt reads at most max bytes of the regular file name in dirfd.
func readAt(dirfd int, name string, max int64) ([]byte, error) {
	f, err := openRegularAt(dirfd, name, syscall.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, max))
}

// readState reads a state file into v; a missing file is (false, nil).
// The read is confined (openStateDir, openRegularAt) and bounded.
func readState(dir, name string, v any) (bool, error) {
	dirfd, err := openStateDir(dir, false)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer syscall.Close(dirfd)
	data, err := readAt(dirfd, name, maxStateBytes+1)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
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
// sees half of it. The temporary file is created anew in the directory
// opened, never through a symlink.
func writeState(dir, name string, v any) error {
	dirfd, err := openStateDir(dir, true)
	if err != nil {
		return err
	}
	defer syscall.Close(dirfd)
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := name + ".tmp"
	if err := syscall.Unlinkat(dirfd, tmp); err != nil && !errors.Is(err, syscall.ENOENT) {
		return &os.PathError{Op: "unlink", Path: tmp, Err: err}
	}
	f, err := openRegularAt(dirfd, tmp, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL, 0o644)
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
	if err := syscall.Renameat(dirfd, tmp, dirfd, name); err != nil {
		return &os.PathError{Op: "rename", Path: name, Err: err}
	}
	return nil
}

// removeState removes a state file, in the directory opened.
func removeState(dir, name string) error {
	dirfd, err := openStateDir(dir, false)
	if err != nil {
		return err
	}
	defer syscall.Close(dirfd)
	if err := syscall.Unlinkat(dirfd, name); err != nil && !errors.Is(err, syscall.ENOENT) {
		return &os.PathError{Op: "unlink", Path: name, Err: err}
	}
	return nil
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
			_ = removeState(dir, e.Name())
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
	return removeState(dir, runFile)
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

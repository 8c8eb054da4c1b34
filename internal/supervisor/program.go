package supervisor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// resolveProgram finds the file to execute for argv0 as the image would
// (a name without a slash is looked up in PATH, a relative path is taken
// from the working directory), preferring at each place the synced copy
// under root: a live update of the program is a new file at
// root/<image path>, and a program that only exists synced (added by a
// live update) runs as well.
func resolveProgram(root, argv0, pathEnv string) (string, error) {
	var candidates []string
	switch {
	case strings.Contains(argv0, "/"):
		p := argv0
		if !filepath.IsAbs(p) {
			wd, err := os.Getwd()
			if err != nil {
				return "", err
			}
			p = filepath.Join(wd, p)
		}
		candidates = []string{p}
	default:
		for _, dir := range filepath.SplitList(pathEnv) {
			if dir == "" {
				dir = "."
			}
			candidates = append(candidates, filepath.Join(dir, argv0))
		}
	}
	for _, c := range candidates {
		if live := filepath.Join(root, c); isExecutable(live) {
			return live, nil
		}
		if isExecutable(c) {
			return c, nil
		}
	}
	return "", fmt.Errorf("program %q: not found (nor a synced copy under %s)", argv0, root)
}

// isExecutable reports whether p is a file some execute bit allows.
func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}

// exitCode is the code a shell reports for a wait status: the exit code,
// or 128 + the signal that ended the process.
func exitCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// startProcess starts argv (argv[0] as written, the file path resolved)
// in a process group of its own, so a stop reaches what it started too,
// with the supervisor's stdin, stdout and stderr.
func startProcess(path string, argv, env []string) (int, error) {
	pid, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{
		Env:   env,
		Files: []uintptr{0, 1, 2},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		return 0, fmt.Errorf("starting %s: %w", path, err)
	}
	return pid, nil
}

// signalGroup sends sig to the process group led by pid; a group already
// gone is not an error.
func signalGroup(pid int, sig syscall.Signal) error {
	err := syscall.Kill(-pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

package helper

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/devloop-dev/devloop/internal/build"
)

// runArgs are the run step's.
type runArgs struct {
	dir, token string
	command    []string
	env        []corev1.EnvVar
	// timeout counts from the build's claim, not from this step.
	timeout  time.Duration
	buildLog string
	// countPackages are the image's Go packages, whose dependencies are
	// counted before the command runs (countpackages.go).
	countPackages []string
}

// runBuildCommand runs the build command of the claimed build a.token in
// the workspace (the caller holds its lock). The command gets a process
// group of its own, recorded with this process's pid, so that the next
// build's claim can kill all it started; at the timeout the whole group
// is killed here too (an exec'd process outlives its closed stream). How
// it ended is kept: exec'd again, the step answers the same without
// running the command twice.
func runBuildCommand(ctx context.Context, a runArgs) error {
	var done stepResult
	if ok, err := readState(a.dir, resultName(a.token, build.WarmStepRun), &done); err != nil || ok {
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "build %s: the build command ran already (an earlier exec of this step)\n", a.token)
		return done.asError(a.command)
	}
	claim, err := claimedBy(a.dir, a.token)
	if err != nil {
		return err
	}
	if err := checkBuildToken(a.dir, a.token); err != nil {
		return err
	}
	if a.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, claim.Started.Add(a.timeout))
		defer cancel()
	}
	logw := openBuildLog(a.buildLog)
	defer logw.Close()
	logw.Printf("build %s: running %v", a.token, a.command)
	// The operator reads the exec stream; a person the container log.
	out := io.MultiWriter(os.Stderr, logw)
	cmd := exec.CommandContext(ctx, a.command[0], a.command[1:]...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = a.dir, out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// At the deadline the whole group goes, not only the command: a
	// compiler's workers must not go on writing into the workspace.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// Output is copied, not inherited: a daemon the command leaves
	// behind holding it open must not keep the step from ending.
	cmd.WaitDelay = 5 * time.Second
	// The pod's environment, then this build's (the revision, the
	// spec's entries); the last of a name wins.
	cmd.Env = os.Environ()
	for _, e := range a.env {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	if len(a.countPackages) > 0 {
		countPackages(ctx, a.dir, a.countPackages, cmd.Env, out, out)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("build command %v: %w", a.command, err)
	}
	if err := writeState(a.dir, runFile, runRecord{Token: a.token, Pid: os.Getpid(), Pgid: cmd.Process.Pid}); err != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		return err
	}
	err = cmd.Wait()
	// What the command started and left behind in its group goes with it.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	result := stepResult{}
	if err != nil {
		logw.Printf("build %s: %v", a.token, err)
		result.Err = err.Error()
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) && exitErr.ExitCode() > 0 {
			result.ExitCode = exitErr.ExitCode()
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			result.TimedOut, result.ExitCode = true, 0
			result.Err = fmt.Sprintf("stopped at the timeout (%s from the build's start)", a.timeout)
		}
	} else {
		logw.Printf("build %s: the build command succeeded", a.token)
	}
	if werr := writeState(a.dir, resultName(a.token, build.WarmStepRun), result); werr != nil {
		return werr
	}
	return result.asError(a.command)
}

// asError is the run step's error for r: the build command's own exit
// code becomes the exec's, so the operator reports it as a Job's would be.
func (r stepResult) asError(command []string) error {
	switch {
	case r.ExitCode > 0:
		return ExitError{Code: r.ExitCode, err: fmt.Errorf("build command %v: %s", command, r.Err)}
	case r.TimedOut:
		// The helper's own exit code for a timeout: the operator tells
		// it from the command's failure.
		return ExitError{Code: build.WarmExitTimedOut, err: fmt.Errorf("build command %v: %s", command, r.Err)}
	case r.Err != "":
		return fmt.Errorf("build command %v: %s", command, r.Err)
	}
	return nil
}

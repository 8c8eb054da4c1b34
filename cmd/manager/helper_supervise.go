package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/devloop-dev/devloop/internal/liveupdate"
)

// supervisorName is the name the build gives the operator's binary in a
// live-updatable image (liveupdate.SupervisorPath). Started under that
// name it is the supervisor: `supervisor supervise|sync ...` is `manager
// helper supervise|sync ...`.
var supervisorName = filepath.Base(liveupdate.SupervisorPath)

// init dispatches before main when the binary runs as the supervisor, so
// the pod's command can be [/.devloop/supervisor, supervise, ...] as the
// live update contract says, without main's flag parsing in the way.
func init() {
	if filepath.Base(os.Args[0]) != supervisorName || len(os.Args) < 2 {
		return
	}
	var err error
	switch os.Args[1] {
	case "supervise":
		err = helperSupervise(os.Args[2:])
	case "sync":
		err = helperSync(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: want supervise or sync", os.Args[1])
	}
	exitWith(err)
}

// exitWith ends the process as main would for err.
func exitWith(err error) {
	var code commandExitError
	switch {
	case err == nil:
		os.Exit(0)
	case errors.As(err, &code):
		os.Exit(code.code)
	}
	fmt.Fprintln(os.Stderr, "devloop:", err)
	os.Exit(1)
}

// helperSupervise is `supervise [flags] -- PROGRAM ARGS...`: run PROGRAM
// under the live update supervisor and exit with its exit code.
func helperSupervise(args []string) error {
	fs := flag.NewFlagSet("supervise", flag.ContinueOnError)
	after := fs.String("after", string(liveupdate.AfterRestart), "what to do after a sync: restart, none or command")
	command := fs.String("after-command", "", "with --after=command, the command to run, as a JSON list")
	root := fs.String("root", liveupdate.LiveRoot, "the live root (the emptyDir synced files are written to)")
	orig := fs.String("orig", liveupdate.OrigDir, "where the image keeps the original files of its live paths")
	gate := fs.Duration("gate-timeout", liveupdate.DefaultGateTimeout, "how long to wait for the operator's first sync before starting with the image's files")
	stop := fs.Duration("stop-timeout", liveupdate.DefaultStopTimeout, "how long a restart waits for the program to stop after SIGTERM before SIGKILL")
	if err := fs.Parse(args); err != nil {
		return err
	}
	s := &liveupdate.Supervisor{Program: fs.Args(), After: liveupdate.After(strings.ToLower(*after)),
		Root: *root, Orig: *orig, GateTimeout: *gate, StopTimeout: *stop}
	switch s.After {
	case liveupdate.AfterRestart, liveupdate.AfterNone:
	case liveupdate.AfterCommand:
		if err := json.Unmarshal([]byte(*command), &s.Command); err != nil || len(s.Command) == 0 {
			return fmt.Errorf("--after-command: want a JSON list of the command and its arguments, got %q", *command)
		}
	default:
		return fmt.Errorf("--after: want restart, none or command, got %q", *after)
	}
	code, err := s.Run()
	if err != nil || code == 0 {
		return err
	}
	return commandExitError{code: code, err: fmt.Errorf("%s exited with code %d", s.Program[0], code)}
}

// helperSync is `sync --digest=D < tar`: write the changed files of image
// digest D (an uncompressed tar on stdin) under the live root, have the
// supervisor restart the program (or its after-action), and print the
// result as one JSON line.
func helperSync(args []string) error {
	fs := flag.NewFlagSet("sync", flag.ContinueOnError)
	digest := fs.String("digest", "", "the image digest the files come from")
	root := fs.String("root", liveupdate.LiveRoot, "the live root")
	orig := fs.String("orig", liveupdate.OrigDir, "where the image keeps the original files of its live paths")
	timeout := fs.Duration("timeout", time.Minute, "how long to wait for the supervisor's after-action")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, *timeout)
	defer cancel()
	res, err := liveupdate.Sync(ctx, *root, *orig, *digest, os.Stdin)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

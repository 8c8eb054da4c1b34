package supervisor

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// Main runs the supervisor's command line and returns the process's exit
// code: `supervise [flags] -- PROGRAM ARGS...` runs PROGRAM under the
// supervisor and exits with its code; `sync --digest=D < tar` writes the
// changed files of image digest D under the live root, has the supervisor
// do its after-action, and prints the result as one JSON line; `sync
// --stream` does so for each frame on stdin (Stream).
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) < 1 {
		fmt.Fprintln(stderr, "devloop supervisor: want a command: supervise or sync")
		return 2
	}
	var code int
	var err error
	switch args[0] {
	case "supervise":
		code, err = superviseCommand(args[1:], stderr)
	case "sync":
		err = syncCommand(args[1:], stdin, stdout, stderr)
	default:
		err = fmt.Errorf("unknown command %q: want supervise or sync", args[0])
	}
	if err != nil {
		fmt.Fprintln(stderr, "devloop:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

func superviseCommand(args []string, stderr io.Writer) (int, error) {
	fs := flag.NewFlagSet("supervise", flag.ContinueOnError)
	fs.SetOutput(stderr)
	after := fs.String("after", string(AfterRestart), "what to do after a sync: restart, none or command")
	command := fs.String("after-command", "", "with --after=command, the command to run, as a JSON list")
	root := fs.String("root", LiveRoot, "the live root (the emptyDir synced files are written to)")
	orig := fs.String("orig", OrigDir, "where the image keeps the original files of its live paths")
	gate := fs.Duration("gate-timeout", DefaultGateTimeout, "how long to wait for the operator's first sync before starting with the image's files")
	stop := fs.Duration("stop-timeout", DefaultStopTimeout, "how long a restart waits for the program to stop after SIGTERM before SIGKILL")
	if err := fs.Parse(args); err != nil {
		return 2, err
	}
	s := &Supervisor{Program: fs.Args(), After: After(strings.ToLower(*after)),
		Root: *root, Orig: *orig, GateTimeout: *gate, StopTimeout: *stop}
	switch s.After {
	case AfterRestart, AfterNone:
	case AfterCommand:
		if err := json.Unmarshal([]byte(*command), &s.Command); err != nil || len(s.Command) == 0 {
			return 2, fmt.Errorf("--after-command: want a JSON list of the command and its arguments, got %q", *command)
		}
	default:
		return 2, fmt.Errorf("--after: want restart, none or command, got %q", *after)
	}
	code, err := s.Run()
	if err == nil && code != 0 {
		err = fmt.Errorf("%s exited with code %d", s.Program[0], code)
	}
	return code, err
}

func syncCommand(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sync", flag.ContinueOnError)
	fs.SetOutput(stderr)
	digest := fs.String("digest", "", "the image digest the files come from")
	root := fs.String("root", LiveRoot, "the live root")
	orig := fs.String("orig", OrigDir, "where the image keeps the original files of its live paths")
	timeout := fs.Duration("timeout", time.Minute, "how long to wait for the supervisor's after-action")
	stream := fs.Bool("stream", false, "read syncs framed on stdin (a JSON line {digest, size}, then the tar) until it closes, answering each with a JSON line")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if *stream {
		return Stream(ctx, *root, *orig, *timeout, stdin, stdout)
	}
	ctx, cancel = context.WithTimeout(ctx, *timeout)
	defer cancel()
	res, err := Sync(ctx, *root, *orig, *digest, stdin)
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(res)
}

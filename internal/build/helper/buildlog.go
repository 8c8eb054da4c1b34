package helper

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"
)

// A warm build's output reaches two readers. The operator reads it from
// the exec stream (a bounded tail for status). A person reads it with
// `kubectl devloop logs` or `kubectl logs`: the build container's main
// process (helper idle) creates a named pipe, the run step tees the build
// command's output into it, and idle copies what comes out to its own
// stdout, so the container log — kept and rotated by the kubelet, read
// through pods/log with the reader's own rights — holds every build's
// output as it is written. A 16-minute compile can then be followed live.

// idleStep is `helper idle [--build-log PIPE]`: wait for builds until
// the pod stops, copying the build log pipe to stdout when one is named.
func idleStep(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("helper idle", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	buildLog := fs.String("build-log", "", "a named pipe to create, whose content is copied to stdout (the warm build's output)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *buildLog != "" {
		if err := serveBuildLog(*buildLog, os.Stdout); err != nil {
			// The builds still run; only their output is not in the
			// container log.
			fmt.Fprintf(os.Stderr, "devloop: the build log is not available: %v\n", err)
		}
	}
	<-ctx.Done()
	return nil
}

// serveBuildLog makes path a named pipe and copies what is written to it
// to out, until the process ends.
func serveBuildLog(path string, out io.Writer) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		return fmt.Errorf("creating %s: %w", path, err)
	}
	// Opened for reading and writing, the pipe never reads as ended
	// between builds, when no writer has it open.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	go func() { _, _ = io.Copy(out, f) }()
	return nil
}

// buildLogWriter writes the build command's output to the build log pipe
// for as long as it can, and never fails the build: with no reader (an
// idle process that did not make the pipe), or one that does not keep up
// within a second, it stops writing and the build goes on.
type buildLogWriter struct {
	mu sync.Mutex
	f  *os.File
}

// openBuildLog opens the pipe at path without waiting for a reader; ""
// or a pipe with no reader gives a writer that discards.
func openBuildLog(path string) *buildLogWriter {
	w := &buildLogWriter{}
	if path == "" {
		return w
	}
	info, err := os.Stat(path)
	if err != nil || info.Mode()&os.ModeNamedPipe == 0 {
		return w
	}
	// O_NONBLOCK: the open fails at once when nobody reads the pipe.
	f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return w
	}
	w.f = f
	return w
}

func (w *buildLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return len(p), nil
	}
	_ = w.f.SetWriteDeadline(time.Now().Add(time.Second))
	if _, err := w.f.Write(p); err != nil {
		_ = w.f.Close()
		w.f = nil
	}
	return len(p), nil
}

// Printf writes a line of devloop's own to the build log.
func (w *buildLogWriter) Printf(format string, args ...any) {
	_, _ = fmt.Fprintf(w, "devloop: "+format+"\n", args...)
}

func (w *buildLogWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return err
}

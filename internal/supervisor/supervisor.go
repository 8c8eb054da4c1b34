package supervisor

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// After is what the supervisor does once a sync changed files.
type After string

const (
	// AfterRestart stops the program (SIGTERM, then SIGKILL after
	// StopTimeout) and starts it again.
	AfterRestart After = "restart"
	// AfterNone does nothing: the program picks the files up itself.
	AfterNone After = "none"
	// AfterCommand runs a command next to the program.
	AfterCommand After = "command"
)

// Defaults of the supervisor's timeouts.
const (
	DefaultGateTimeout = 3 * time.Second
	DefaultStopTimeout = 5 * time.Second
)

// forwarded are the signals the supervisor passes on to the program.
var forwarded = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP,
	syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// Supervisor runs a live-updatable container's program.
type Supervisor struct {
	// Program is the argv the container would have run.
	Program []string
	// After and Command are the after-action; Command only with
	// AfterCommand.
	After   After
	Command []string
	// Root is the live root (LiveRoot in a pod); Orig where the image
	// keeps its live paths' own files (OrigDir), seeded into Root.
	Root, Orig string
	// GateTimeout bounds the wait for the first sync; StopTimeout the
	// wait for the program to stop after SIGTERM in a restart.
	GateTimeout, StopTimeout time.Duration
	// Log receives the supervisor's own lines (the program's output goes
	// straight to the container's stdout and stderr).
	Log io.Writer
}

// Run starts the program once the start gate opens, serves syncs, and
// returns the code to exit with: the program's own when it exits, or 128
// + the signal that ended it. An error is returned when the supervisor
// cannot do its work at all (no socket, a program that does not start).
func (s *Supervisor) Run() (int, error) {
	if len(s.Program) == 0 {
		return 0, errors.New("no program to supervise")
	}
	if s.After == AfterCommand && len(s.Command) == 0 {
		return 0, errors.New("--after=command needs the command to run")
	}
	if s.Log == nil {
		s.Log = os.Stderr
	}
	if s.StopTimeout <= 0 {
		s.StopTimeout = DefaultStopTimeout
	}
	// Signals first: from here on none is lost, SIGCHLD included.
	signals := make(chan os.Signal, 32)
	signal.Notify(signals, append([]os.Signal{syscall.SIGCHLD}, forwarded...)...)
	defer signal.Stop(signals)

	l, err := listenAt(filepath.Join(s.Root, SocketName))
	if err != nil {
		return 0, fmt.Errorf("listening for syncs: %w", err)
	}
	defer l.Close()
	requests := make(chan request)
	go serve(l, requests)

	loop := &loop{s: s, signals: signals, requests: requests, commands: map[int]request{}}
	return loop.run()
}

// loop is the supervisor's state, owned by one goroutine: every event
// (signal, child exit, notice, timer) is handled in run's select.
type loop struct {
	s        *Supervisor
	signals  chan os.Signal
	requests chan request

	child int // pid of the program, 0 when not running
	// stopping is set once a termination signal was forwarded: the
	// program's exit then ends the supervisor.
	stopping bool
	// restarting holds the notices waiting for the program to be started
	// again; the program's exit then starts it instead of ending.
	restarting []request
	killTimer  <-chan time.Time
	// commands are running after-commands, by pid.
	commands map[int]request
}

func (l *loop) run() (int, error) {
	var gate <-chan time.Time
	if d, err := os.ReadFile(filepath.Join(l.s.Root, DigestName)); err == nil {
		l.logf("resuming with the files of %s synced before this container restarted", strings.TrimSpace(string(d)))
		if err := l.start(); err != nil {
			return 0, err
		}
	} else {
		if n, err := seed(l.s.Root, l.s.Orig); err != nil {
			return 0, fmt.Errorf("seeding %s from %s: %w", l.s.Root, l.s.Orig, err)
		} else if n > 0 {
			l.logf("linked %d files of %s into %s", n, l.s.Orig, l.s.Root)
		}
		gate = time.After(l.gateTimeout())
	}
	for {
		select {
		case <-gate:
			gate = nil
			l.logf("no sync within %s: starting with the image's files", l.gateTimeout())
			if err := l.start(); err != nil {
				return 0, err
			}
		case req := <-l.requests:
			if l.child == 0 && gate != nil {
				gate = nil
				err := l.start()
				l.answer(req, err, true)
				if err != nil {
					return 0, err
				}
				continue
			}
			l.handle(req)
		case <-l.killTimer:
			l.killTimer = nil
			l.logf("program did not stop within %s: killing it", l.s.StopTimeout)
			_ = signalGroup(l.child, syscall.SIGKILL)
		case sig := <-l.signals:
			if sig != syscall.SIGCHLD {
				l.forward(sig.(syscall.Signal))
				if l.child == 0 && (sig == syscall.SIGTERM || sig == syscall.SIGINT) {
					return 128 + int(sig.(syscall.Signal)), nil
				}
				continue
			}
			if code, done, err := l.reap(); done || err != nil {
				return code, err
			}
		}
	}
}

func (l *loop) gateTimeout() time.Duration {
	if l.s.GateTimeout <= 0 {
		return DefaultGateTimeout
	}
	return l.s.GateTimeout
}

// handle acts on a notice while the program runs (or is being
// restarted).
func (l *loop) handle(req request) {
	switch {
	case !req.Changed || l.s.After == AfterNone:
		l.answer(req, nil, false)
	case l.stopping:
		l.answer(req, errors.New("the container is stopping"), false)
	case l.s.After == AfterCommand:
		argv := l.s.Command
		path, err := exec.LookPath(argv[0])
		var pid int
		if err == nil {
			pid, err = startProcess(path, argv, l.env())
		}
		if err != nil {
			l.answer(req, fmt.Errorf("after-command %s: %w", argv[0], err), false)
			return
		}
		l.commands[pid] = req
	default: // AfterRestart
		if len(l.restarting) == 0 {
			l.logf("restarting the program for %s", req.Digest)
			_ = signalGroup(l.child, syscall.SIGTERM)
			l.killTimer = time.After(l.s.StopTimeout)
		}
		l.restarting = append(l.restarting, req)
	}
}

// reap collects every exited child. When the program exited it either
// starts it again (a restart) or says the supervisor is done, with the
// program's exit code.
func (l *loop) reap() (code int, done bool, err error) {
	for {
		var ws syscall.WaitStatus
		pid, werr := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || werr != nil {
			return 0, false, nil // nothing (more) to reap
		}
		if req, ok := l.commands[pid]; ok {
			delete(l.commands, pid)
			var cerr error
			if !ws.Exited() || ws.ExitStatus() != 0 {
				cerr = fmt.Errorf("after-command %s exited with code %d", l.s.Command[0], exitCode(ws))
			}
			l.answer(req, cerr, false)
			continue
		}
		if pid != l.child {
			continue // an orphan reparented to PID 1
		}
		l.child = 0
		if len(l.restarting) == 0 || l.stopping {
			if !l.stopping {
				l.logf("program exited with code %d", exitCode(ws))
			}
			return exitCode(ws), true, nil
		}
		l.killTimer = nil
		err := l.start()
		for _, req := range l.restarting {
			l.answer(req, err, false)
		}
		l.restarting = nil
		if err != nil {
			// Nothing left to supervise: the container restarts (with
			// the same files) and the operator, told of the failure,
			// rolls the component out instead.
			l.waitForAnswers()
			return 127, true, err
		}
	}
}

// forward passes sig to the program's process group.
func (l *loop) forward(sig syscall.Signal) {
	if sig == syscall.SIGTERM || sig == syscall.SIGINT {
		l.stopping = true
	}
	if l.child != 0 {
		_ = signalGroup(l.child, sig)
	}
}

// start starts the program, its synced copy preferred.
func (l *loop) start() error {
	path, err := resolveProgram(l.s.Root, l.s.Program[0], os.Getenv("PATH"))
	if err != nil {
		return err
	}
	pid, err := startProcess(path, l.s.Program, l.env())
	if err != nil {
		return err
	}
	l.child = pid
	return nil
}

// env is the supervisor's environment plus where synced files are.
func (l *loop) env() []string {
	return append(os.Environ(), LiveRootEnv+"="+l.s.Root)
}

// answer replies to one notice.
func (l *loop) answer(req request, err error, started bool) {
	r := reply{RestartedMs: time.Since(req.received).Milliseconds(), Started: started}
	if err != nil {
		r.Error = err.Error()
	}
	req.answer <- r
}

// waitForAnswers gives the connections a moment to write their answers
// before the supervisor exits.
func (l *loop) waitForAnswers() { time.Sleep(200 * time.Millisecond) }

func (l *loop) logf(format string, args ...any) {
	fmt.Fprintf(l.s.Log, "devloop-supervisor: "+format+"\n", args...)
}

package liveupdate

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/devloop-dev/devloop/internal/identity"
	"github.com/devloop-dev/devloop/internal/message"
	"github.com/devloop-dev/devloop/internal/supervisor"
)

// A session is one exec of `supervisor sync --stream` in a container, kept
// open between live updates (Engine.Sessions): an exec's setup (the API
// server, the kubelet, the runtime starting a process in the container)
// is paid once per container instead of on every sync. A session that
// breaks is dropped and the sync done by a one-shot exec instead.
//
// A session is opened as the environment's ServiceAccount and keyed by
// the container, that user (namespace and name: two namespaces' deployer
// are two users) and the environment's UID, so no environment's sync
// rides an exec another one's identity opened; it is closed after
// sessionIdle without a sync, so a right the ServiceAccount loses stops
// being used within that time.
type session struct {
	key    string
	mu     sync.Mutex // one sync at a time
	stdin  *io.PipeWriter
	stdout *io.PipeReader
	lines  *bufio.Reader
	cancel context.CancelFunc
	idle   *time.Timer
	done   chan struct{}
	// answered is set once a frame was answered: a session that ends
	// before that is taken for a supervisor without --stream.
	answered atomic.Bool
	stderr   *boundedBuffer
	err      error // why the exec ended, once done is closed
	// base is the tar synced last over the session (under Engine.mu,
	// counted in its baseBytes); noDelta a supervisor that refused a
	// delta frame as a tar (one without deltas).
	base    []byte
	noDelta bool
}

// sessionIdle closes a session not used for this long.
const sessionIdle = 10 * time.Minute

// maxNoStream bounds the containers remembered as unable to stream.
const maxNoStream = 1024

// errSessionBroken is a session that could not carry a sync: the sync is
// done by a one-shot exec instead.
var errSessionBroken = errors.New("sync session broken")

// sessionKey names a container's session for one identity: the user the
// exec is made as (system:serviceaccount:<namespace>:<name>, never the
// name alone) and the environment it is made for.
func sessionKey(t *identity.Tenant, envUID types.UID, target Target) string {
	return target.Namespace + "/" + target.Pod + "/" + target.Container + "|" + t.Describe() + "|" + string(envUID)
}

// syncOverSession syncs target over its session, opening one when there
// is none. A transport failure is errSessionBroken (the session is gone);
// an error the supervisor answered is the sync's own failure.
//
// The tar synced last over the session is kept (within maxBaseBytes for
// all sessions) as the base of the next one's deltas: the files it wrote
// are what the live root holds, so the next sync sends each file as a
// delta against them (supervisor.DeltaTar), a few KiB for a rebuilt
// binary instead of all of it. The supervisor checks each file it makes
// against the SHA-256 of the one meant; a delta it refuses (a file
// changed meanwhile, a supervisor that knows no deltas) is followed by
// the tar whole, on the same session.
func (e *Engine) syncOverSession(ctx context.Context, t *identity.Tenant, envUID types.UID, target Target, digest string, tarball []byte) (syncResult, error) {
	s := e.session(t, envUID, target)
	if s == nil {
		return syncResult{}, errSessionBroken
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.idle.Reset(sessionIdle)
	if base := e.baseOf(s); base != nil && !s.noDelta {
		if body, ok, err := supervisor.DeltaTar(base, tarball); err == nil && ok {
			r, err := e.frame(ctx, s, target, supervisor.Frame{Digest: digest, Size: int64(len(body)), Delta: true}, body)
			if err != nil {
				return syncResult{}, err
			}
			if r.Error == "" {
				e.keepBase(s, tarball)
				return syncResult{Digest: r.Digest, RestartedMs: r.RestartedMs, Sent: len(body)}, nil
			}
			if strings.Contains(r.Error, "reading the tar of changed files") {
				// A supervisor that knows no deltas read the magic as
				// a tar header.
				s.noDelta = true
			}
			log.FromContext(ctx).V(1).Info("a delta sync was refused; sending the files whole", "container", target.Container, "reason", message.Truncate(r.Error, 256))
		}
	}
	e.keepBase(s, nil)
	r, err := e.frame(ctx, s, target, supervisor.Frame{Digest: digest, Size: int64(len(tarball))}, tarball)
	if err != nil {
		return syncResult{}, err
	}
	res := syncResult{Digest: r.Digest, RestartedMs: r.RestartedMs, Sent: len(tarball)}
	if r.Error != "" {
		return res, errors.New(message.Truncate(r.Error, 256))
	}
	e.keepBase(s, tarball)
	return res, nil
}

// frame sends one frame over s and reads its answer. A transport failure
// is errSessionBroken (the session is closed).
func (e *Engine) frame(ctx context.Context, s *session, target Target, f supervisor.Frame, body []byte) (supervisor.StreamReply, error) {
	head, err := json.Marshal(f)
	if err != nil {
		return supervisor.StreamReply{}, err
	}
	wrote := make(chan error, 1)
	go func() {
		_, err := s.stdin.Write(append(head, '\n'))
		if err == nil {
			_, err = s.stdin.Write(body)
		}
		wrote <- err
	}()
	type answer struct {
		line []byte
		err  error
	}
	read := make(chan answer, 1)
	go func() {
		line, err := readAnswer(s.lines)
		read <- answer{line, err}
	}()
	var a answer
	select {
	case a = <-read:
	case <-ctx.Done():
		e.closeSession(s)
		return supervisor.StreamReply{}, fmt.Errorf("%w: %v", errSessionBroken, ctx.Err())
	}
	if errors.Is(a.err, errAnswerTooLong) {
		// The stream is out of step, and this container answers what
		// no supervisor does: the sync fails, with no one-shot retry.
		e.closeSession(s)
		return supervisor.StreamReply{}, fmt.Errorf("container %s: %w", target.Container, a.err)
	}
	if a.err != nil {
		e.closeSession(s)
		<-s.done
		return supervisor.StreamReply{}, fmt.Errorf("%w: %v", errSessionBroken, s.why(a.err))
	}
	if err := <-wrote; err != nil {
		e.closeSession(s)
		return supervisor.StreamReply{}, fmt.Errorf("%w: %v", errSessionBroken, err)
	}
	s.answered.Store(true)
	var r supervisor.StreamReply
	if err := json.Unmarshal(a.line, &r); err != nil {
		e.closeSession(s)
		return r, fmt.Errorf("%w: the supervisor answered %q", errSessionBroken, message.Truncate(string(a.line), 128))
	}
	return r, nil
}

// maxBaseBytes bounds the tars all sessions keep as their deltas' bases;
// a session past it keeps none (its next sync sends the files whole).
const maxBaseBytes = 128 << 20

// keepBase makes tarball (nil: none) the base of s's next delta.
func (e *Engine) keepBase(s *session, tarball []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.baseBytes -= int64(len(s.base))
	s.base = nil
	if int64(len(tarball))+e.baseBytes <= maxBaseBytes {
		s.base = tarball
		e.baseBytes += int64(len(tarball))
	}
}

// baseOf is the base of s's next delta, nil for none.
func (e *Engine) baseOf(s *session) []byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	return s.base
}

// session is target's open session, opened now if there is none; nil
// for a container whose supervisor cannot stream.
func (e *Engine) session(t *identity.Tenant, envUID types.UID, target Target) *session {
	key := sessionKey(t, envUID, target)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.noStream[key] {
		return nil
	}
	if s, ok := e.sessions[key]; ok {
		return s
	}
	if e.sessions == nil {
		e.sessions = map[string]*session{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	stdinR, stdinW := io.Pipe()
	stdoutR, stdoutW := io.Pipe()
	s := &session{key: key, stdin: stdinW, stdout: stdoutR, lines: bufio.NewReader(stdoutR), cancel: cancel,
		done: make(chan struct{}), stderr: &boundedBuffer{max: maxStderr}}
	s.idle = time.AfterFunc(sessionIdle, func() { e.closeSession(s) })
	e.sessions[key] = s
	cmd := []string{supervisor.Path, "sync", "--stream"}
	go func() {
		err := e.exec(ctx, t, target, cmd, stdinR, stdoutW, s.stderr)
		if err == nil {
			err = io.EOF
		}
		s.err = err
		_ = stdoutW.CloseWithError(err)
		_ = stdinR.CloseWithError(err)
		e.mu.Lock()
		if e.sessions[key] == s {
			delete(e.sessions, key)
		}
		e.baseBytes -= int64(len(s.base))
		s.base = nil
		if !s.answered.Load() && strings.Contains(s.stderr.String(), "-stream") {
			// A supervisor without --stream (an image of an older
			// operator) refused the flag.
			if len(e.noStream) >= maxNoStream {
				e.noStream = nil
			}
			if e.noStream == nil {
				e.noStream = map[string]bool{}
			}
			e.noStream[key] = true
		}
		e.mu.Unlock()
		close(s.done)
	}()
	return s
}

// closeSession ends a session's exec; its goroutine forgets it. Closing
// the read side too stops an exec still writing (unread) at once.
func (e *Engine) closeSession(s *session) {
	s.idle.Stop()
	s.cancel()
	_ = s.stdin.Close()
	_ = s.stdout.CloseWithError(errSessionBroken)
}

// why says why a session's exec ended, with its stderr.
func (s *session) why(readErr error) error {
	err := s.err
	if err == nil {
		err = readErr
	}
	if msg := strings.TrimSpace(s.stderr.String()); msg != "" {
		err = fmt.Errorf("%w: %s", err, message.Truncate(message.Condense(msg), 256))
	}
	return err
}

// exec runs command in target's container as the tenant.
func (e *Engine) exec(ctx context.Context, t *identity.Tenant, target Target, command []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if e.Exec != nil {
		return e.Exec.Exec(ctx, t, target.Namespace, target.Pod, target.Container, command, stdin, stdout, stderr)
	}
	return t.ExecWithStdin(ctx, target.Namespace, target.Pod, target.Container, command, stdin, stdout, stderr)
}

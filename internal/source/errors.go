package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"syscall"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/devloop-dev/devloop/internal/fault"
)

// subject names what an error is about, so every message a user sees in
// status says which source, which kind and which URL or reference failed:
// `source "app": git https://h/x.git: branch "dev" not found`.
type subject struct {
	source, kind, target string
}

func (s subject) String() string {
	return fmt.Sprintf("source %q: %s %s", s.source, s.kind, s.target)
}

// permanent is an error retrying cannot fix until the spec, a Secret or the
// remote side changes.
func (s subject) permanent(format string, args ...any) error {
	return fault.Permanent(fmt.Errorf("%s: "+format, append([]any{s}, args...)...))
}

// unavailable is an error of a server that is down for now.
func (s subject) unavailable(format string, args ...any) error {
	return fault.Unavailable(fmt.Errorf("%s: "+format, append([]any{s}, args...)...))
}

// wrap prefixes err with the subject and keeps its class; an unclassified
// network failure becomes Unavailable so the reconciler backs off instead of
// stalling.
func (s subject) wrap(err error) error {
	if err == nil {
		return nil
	}
	wrapped := fmt.Errorf("%s: %w", s, err)
	switch {
	case fault.IsPermanent(err):
		return fault.Permanent(wrapped)
	case fault.IsUnavailable(err), isNetworkError(err):
		return fault.Unavailable(wrapped)
	}
	return wrapped
}

// causes visits err and everything it wraps, including the go-git error
// types that do not implement Unwrap, so classification sees the root cause.
func causes(err error, visit func(error) bool) bool {
	for err != nil {
		if visit(err) {
			return true
		}
		switch e := err.(type) {
		case *plumbing.UnexpectedError:
			err = e.Err
		case *plumbing.PermanentError:
			err = e.Err
		case interface{ Unwrap() []error }:
			for _, inner := range e.Unwrap() {
				if causes(inner, visit) {
					return true
				}
			}
			return false
		default:
			err = errors.Unwrap(err)
		}
	}
	return false
}

// isNetworkError reports failures of the connection rather than answers of
// the server: they go away when the server comes back.
func isNetworkError(err error) bool {
	return causes(err, func(e error) bool {
		if errors.Is(e, context.DeadlineExceeded) || errors.Is(e, io.ErrUnexpectedEOF) {
			return true
		}
		switch {
		case errors.Is(e, syscall.ECONNREFUSED), errors.Is(e, syscall.ECONNRESET),
			errors.Is(e, syscall.EHOSTUNREACH), errors.Is(e, syscall.ENETUNREACH),
			errors.Is(e, syscall.ETIMEDOUT), errors.Is(e, syscall.EPIPE):
			return true
		}
		var ne net.Error
		if errors.As(e, &ne) && ne.Timeout() {
			return true
		}
		var dns *net.DNSError
		if errors.As(e, &dns) {
			// A name that does not resolve is often a cluster DNS hiccup;
			// a typo shows up as a message that never goes away.
			return true
		}
		var op *net.OpError
		return errors.As(e, &op)
	})
}

// redactURL hides a password embedded in a URL: error messages end up in
// status and events, which must never carry secrets.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	if _, ok := u.User.Password(); ok {
		return u.Redacted()
	}
	return raw
}

// accessFailure is a fill's failure to read the manifest it was asked for
// with the credentials it was given: the asker's answer, not a refusal of
// the content remembered for everyone who asks (refusals.go).
type accessFailure struct{ err error }

func (a *accessFailure) Error() string { return a.err.Error() }
func (a *accessFailure) Unwrap() error { return a.err }

package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/devloop-dev/devloop/internal/fault"
)

// failure is what a registry error means to the reconciler.
type failure int

const (
	// failureOther is any other error: retried with backoff.
	failureOther failure = iota
	// failureUnavailable: the registry is down, overloaded or too slow.
	failureUnavailable
	// failureDenied: the credentials do not allow the request (401/403).
	failureDenied
	// failureNotFound: the manifest or repository does not exist.
	failureNotFound
	// failurePlainHTTP: HTTPS failed and plain HTTP is not allowed.
	failurePlainHTTP
	// failureNoSuchHost: the registry's host name does not resolve
	// (NXDOMAIN): waited for like a registry down, but a name that never
	// resolves is a mistake in the spec (NoSuchHostError).
	failureNoSuchHost
)

// classify tells what a go-containerregistry error means. The network is
// looked at first: when HTTPS to a localhost registry is refused,
// go-containerregistry also tries plain HTTP, and the guard's refusal of
// that second attempt must not hide that the registry is simply down.
func classify(err error) failure {
	switch {
	case err == nil || errors.Is(err, context.Canceled):
		return failureOther
	case noSuchHost(err) != "":
		return failureNoSuchHost
	case networkDown(err):
		return failureUnavailable
	}
	var terr *transport.Error
	if errors.As(err, &terr) {
		switch {
		case terr.StatusCode == http.StatusUnauthorized || terr.StatusCode == http.StatusForbidden:
			return failureDenied
		case terr.StatusCode == http.StatusNotFound:
			return failureNotFound
		case terr.StatusCode == http.StatusRequestTimeout || terr.StatusCode == http.StatusTooManyRequests || terr.StatusCode >= 500:
			return failureUnavailable
		}
		for _, d := range terr.Errors {
			switch d.Code {
			case transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode:
				return failureNotFound
			case transport.UnauthorizedErrorCode, transport.DeniedErrorCode:
				return failureDenied
			case transport.UnavailableErrorCode, transport.TooManyRequestsErrorCode:
				return failureUnavailable
			}
		}
	}
	var plain *PlainHTTPError
	if errors.As(err, &plain) {
		return failurePlainHTTP
	}
	return failureOther
}

// networkDown reports errors of a registry that cannot be reached or does
// not answer in time.
func networkDown(err error) bool {
	for _, errno := range []syscall.Errno{syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.EHOSTUNREACH, syscall.ENETUNREACH, syscall.ETIMEDOUT} {
		if errors.Is(err, errno) {
			return true
		}
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return true
	}
	var nerr net.Error
	return errors.As(err, &nerr) && nerr.Timeout()
}

// noSuchHost is the host name of a lookup that found no such host.
func noSuchHost(err error) string {
	var dns *net.DNSError
	if errors.As(err, &dns) && dns.IsNotFound {
		return dns.Name
	}
	return ""
}

// NoSuchHostError is a registry whose host name does not resolve. It is
// Unavailable (DNS may be catching up with a new name); the build engine
// stalls after a bounded number of tries, naming Field, the spec field
// that holds the name.
type NoSuchHostError struct {
	Host  string
	Field string
	err   error
}

// NewNoSuchHostError is err, of a registry host that does not resolve,
// named by field; Unavailable, as the image package's own.
func NewNoSuchHostError(host, field string, err error) error {
	return fault.Unavailable(&NoSuchHostError{Host: host, Field: field, err: err})
}

// Error is the message for the user.
func (e *NoSuchHostError) Error() string { return e.err.Error() }

// Unwrap is the explained error.
func (e *NoSuchHostError) Unwrap() error { return e.err }

// registryWords is what the registry said: its error diagnostics, or the
// HTTP status when it said nothing more (HEAD responses have no body).
func registryWords(err error) string {
	var terr *transport.Error
	if !errors.As(err, &terr) {
		return err.Error()
	}
	if len(terr.Errors) == 0 {
		return fmt.Sprintf("%d %s", terr.StatusCode, http.StatusText(terr.StatusCode))
	}
	words := make([]string, 0, len(terr.Errors))
	for _, d := range terr.Errors {
		words = append(words, d.String())
	}
	return strings.Join(words, "; ")
}

// explainedError carries a message written for the user while keeping the
// registry's error in the chain for errors.Is and errors.As.
type explainedError struct {
	msg string
	err error
}

// Error is the message for the user.
func (e *explainedError) Error() string { return e.msg }

// Unwrap is the registry's error.
func (e *explainedError) Unwrap() error { return e.err }

func explain(err error, format string, args ...any) error {
	return &explainedError{msg: fmt.Sprintf(format, args...), err: err}
}

// pushError classifies an error of a request to the target repository
// (a push, or a HEAD before it). Denied access is the same mistake whether
// the registry refused the read or the write: wrong or missing credentials.
func pushError(err error, repo string) error {
	switch classify(err) {
	case failureDenied:
		return fault.Permanent(explain(err, "push access denied to %s: check credentialsRef: %s", repo, registryWords(err)))
	case failureUnavailable:
		return fault.Unavailable(explain(err, "registry unavailable for %s: %v", repo, err))
	case failureNoSuchHost:
		return fault.Unavailable(&NoSuchHostError{Host: noSuchHost(err), Field: "spec.registry.prefix",
			err: explain(err, "registry host of %s does not resolve: %v", repo, err)})
	case failurePlainHTTP:
		return fault.Permanent(explain(err, "push to %s: %v", repo, err))
	}
	if err == nil {
		return nil
	}
	return explain(err, "push to %s: %v", repo, err)
}

// baseError classifies an error of fetching the base image of image.
func baseError(err error, image, base string) error {
	// The engine names the image itself when it calls without one.
	prefix := ""
	if image != "" {
		prefix = "image " + image + ": "
	}
	switch classify(err) {
	case failureNotFound:
		return fault.Permanent(explain(err, "%sbase image %s not found: %s", prefix, base, registryWords(err)))
	case failureDenied:
		return fault.Permanent(explain(err, "%spull access denied to base image %s: check credentialsRef: %s", prefix, base, registryWords(err)))
	case failureUnavailable:
		return fault.Unavailable(explain(err, "%sregistry of base image %s unavailable: %v", prefix, base, err))
	case failureNoSuchHost:
		field := "the image's base"
		if image != "" {
			field = "spec.components[].images[" + image + "].base"
		}
		return fault.Unavailable(&NoSuchHostError{Host: noSuchHost(err), Field: field,
			err: explain(err, "%sregistry of base image %s does not resolve: %v", prefix, base, err)})
	case failurePlainHTTP:
		return fault.Permanent(explain(err, "%sbase image %s: %v; for a base on another plain-HTTP registry, set baseInsecure: true on the image", prefix, base, err))
	}
	if err == nil {
		return nil
	}
	return explain(err, "%sbase image %s: %v", prefix, base, err)
}

// Package fault classifies errors by what retrying can do about them, so the
// reconciler can map them to status without knowing where they came from:
//
//   - Permanent: retrying cannot help until the spec, a Secret or the
//     cluster changes (an unknown base image, a denied push, a missing source
//     path). The environment is Stalled.
//   - Unavailable: something the environment depends on is down or
//     overloaded (a registry answering 5xx, a refused connection). The
//     environment is Reconciling with a Waiting reason and is retried with
//     backoff.
//
// Anything else is a plain error, retried with backoff.
package fault

import (
	"errors"
	"fmt"
)

// PermanentError is an error retrying cannot fix.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// UnavailableError is an error of a dependency that is down for now.
type UnavailableError struct{ Err error }

func (e *UnavailableError) Error() string { return e.Err.Error() }
func (e *UnavailableError) Unwrap() error { return e.Err }

// Permanent marks err as permanent. Nil stays nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// Permanentf is fmt.Errorf marked permanent.
func Permanentf(format string, args ...any) error {
	return &PermanentError{Err: fmt.Errorf(format, args...)}
}

// Unavailable marks err as a dependency being down. Nil stays nil.
func Unavailable(err error) error {
	if err == nil {
		return nil
	}
	return &UnavailableError{Err: err}
}

// Unavailablef is fmt.Errorf marked unavailable.
func Unavailablef(format string, args ...any) error {
	return &UnavailableError{Err: fmt.Errorf(format, args...)}
}

// IsPermanent reports whether err, or an error it wraps, is permanent.
func IsPermanent(err error) bool {
	var p *PermanentError
	return errors.As(err, &p)
}

// IsUnavailable reports whether err, or an error it wraps, is a dependency
// being down.
func IsUnavailable(err error) bool {
	var u *UnavailableError
	return errors.As(err, &u)
}

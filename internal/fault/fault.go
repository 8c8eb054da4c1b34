// Package fault classifies errors by what retrying can do about them, so the
// reconciler can map them to status without knowing where they came from:
//
//   - Permanent: retrying cannot help until the spec, a Secret or the
//     cluster changes (an unknown base image, a denied push, a missing source
//     path). The environment is Stalled.
//
//   - Unavailable: something the environment depends on is down or
//     overloaded (a registry answering 5xx, a refused connection). The
//     environment is Reconciling with a Waiting reason and is retried on
//     the reconciler's wait schedule (at most about 30 s apart), logged
//     at Info, not as an error.
//
//   - Stalled (with a reason): like Permanent, where the engine knows the
//     condition reason to show.
//
//   - Waiting (with a reason): work under way elsewhere, looked at again
//     after an interval without counting as a failure. With the reason
//     Waiting and no interval it is a wait on something outside (a tag
//     not pushed yet), retried on the wait schedule like Unavailable.
//
// Anything else is a plain error, retried with backoff.
//
// These are how an engine says it; at the engine boundary they are two
// classes, Stalling and Waiting (or neither), and Classify (class.go) is
// the one place a kind becomes a class.
package fault

import (
	"errors"
	"fmt"
	"time"
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

// StalledError means work cannot go on until the spec or the cluster
// changes: the environment is Stalled with Reason (a condition reason) and
// is not requeued. Engines return it where they know the reason best.
type StalledError struct {
	Reason string
	Err    error
}

func (e *StalledError) Error() string { return e.Err.Error() }
func (e *StalledError) Unwrap() error { return e.Err }

// Stalled marks err as stalling with reason. Nil stays nil.
func Stalled(reason string, err error) error {
	if err == nil {
		return nil
	}
	return &StalledError{Reason: reason, Err: err}
}

// Stalledf is fmt.Errorf marked stalling with reason.
func Stalledf(reason, format string, args ...any) error {
	return &StalledError{Reason: reason, Err: fmt.Errorf(format, args...)}
}

// AsStalled returns the StalledError in err's chain, or nil.
func AsStalled(err error) *StalledError {
	var s *StalledError
	if errors.As(err, &s) {
		return s
	}
	return nil
}

// WaitingError means work is under way elsewhere (a rollout, a
// dependency): the environment is Reconciling with Reason and is looked
// at again after RequeueAfter (a default when zero).
type WaitingError struct {
	Reason       string
	Err          error
	RequeueAfter time.Duration
}

func (e *WaitingError) Error() string { return e.Err.Error() }
func (e *WaitingError) Unwrap() error { return e.Err }

// AsWaiting returns the WaitingError in err's chain, or nil.
func AsWaiting(err error) *WaitingError {
	var w *WaitingError
	if errors.As(err, &w) {
		return w
	}
	return nil
}

// StallPermanent is how an engine reports what it could not do: a
// permanent error stalls the environment with reason (a human must change
// something); one already Stalled keeps its reason; anything else
// (transient, Unavailable) is returned as is, to be retried.
func StallPermanent(reason string, err error) error {
	if err == nil || AsStalled(err) != nil || !IsPermanent(err) {
		return err
	}
	return Stalled(reason, err)
}

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// connectTo connects (checking the context against the allow-list) and
// reads environment name: the prologue of every command about one
// environment.
func (a *app) connectTo(ctx context.Context, name string) (*session, *v1alpha1.DevEnvironment, error) {
	s, err := a.connect()
	if err != nil {
		return nil, nil, err
	}
	env, err := s.getEnv(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	return s, env, nil
}

// connectFind is connectTo for a command that may run before its
// environment exists (writing a Secret it will read): env is nil then.
func (a *app) connectFind(ctx context.Context, name string) (*session, *v1alpha1.DevEnvironment, error) {
	s, err := a.connect()
	if err != nil {
		return nil, nil, err
	}
	env, err := findEnv(ctx, s, name)
	if err != nil {
		return nil, nil, err
	}
	return s, env, nil
}

// getEnv reads an environment, saying where it looked when it is not there.
func (s *session) getEnv(ctx context.Context, name string) (*v1alpha1.DevEnvironment, error) {
	env, err := findEnv(ctx, s, name)
	if err == nil && env == nil {
		return nil, fmt.Errorf("devenvironment %q not found in namespace %q of context %q: list them with `kubectl get devenv -A`, pick the namespace with -n", name, s.namespace, s.context)
	}
	return env, err
}

// findEnv reads an environment; nil, and no error, when there is none (a
// Secret is often written before the environment that names it).
func findEnv(ctx context.Context, s *session, name string) (*v1alpha1.DevEnvironment, error) {
	env := &v1alpha1.DevEnvironment{}
	err := s.client.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: name}, env)
	if apierrors.IsNotFound(err) && s.discovered != nil {
		// The kind is mapped without discovery (mapper.go): a cluster
		// without devloop answers 404 too. Discovery tells them apart.
		if _, derr := s.discovered.RESTMapping(v1alpha1.GroupVersion.WithKind("DevEnvironment").GroupKind(), v1alpha1.GroupVersion.Version); meta.IsNoMatchError(derr) {
			err = derr
		}
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case meta.IsNoMatchError(err):
		return nil, fmt.Errorf("the cluster of context %q has no DevEnvironment API (devloop.dev/v1alpha1): is devloop installed there?", s.context)
	case err != nil:
		return nil, fmt.Errorf("reading devenvironment %s/%s: %w", s.namespace, name, err)
	}
	return env, nil
}

// progress prints what a long wait sees: a line, with the time since the
// start, whenever the state changes, and a "still" line every interval
// while it does not, so a terminal and a CI log both show that it is alive.
type progress struct {
	w         io.Writer
	start     time.Time
	every     time.Duration
	last      string
	lastPrint time.Time
}

func newProgress(w io.Writer, every time.Duration) *progress {
	now := time.Now()
	return &progress{w: w, start: now, every: every, lastPrint: now}
}

func (p *progress) elapsed() time.Duration { return time.Since(p.start) }

// show prints state if it changed, or a reminder when it has not for a
// while. An empty state prints nothing.
func (p *progress) show(state string) {
	now := time.Now()
	switch {
	case state == "":
		return
	case state != p.last:
		fmt.Fprintf(p.w, "[%6s] %s\n", seconds(now.Sub(p.start)), printable(state))
	case now.Sub(p.lastPrint) >= p.every:
		fmt.Fprintf(p.w, "[%6s] still %s\n", seconds(now.Sub(p.start)), printable(state))
	default:
		return
	}
	p.last, p.lastPrint = state, now
}

// check looks at an environment and says what it sees (for progress),
// whether the wait is over, and with what error.
type check func(env *v1alpha1.DevEnvironment) (state string, done bool, err error)

// maxRead bounds one read of the environment while following it.
const maxRead = 30 * time.Second

// errTimeout marks a wait that ran out of time.
var errTimeout = errors.New("timed out")

// follow looks at the environment, then at each new version of it as a
// watch delivers it, until check says done, timeout passes (0: no limit)
// or ctx is cancelled. A watch that cannot be had (a user who may get
// but not watch devenvironments) or that ends is made up for by reading
// again every poll interval until a new watch opens: a change never waits
// for a poll where a watch works. The timeout is the wait's, not each
// read's: a read cut by it would fail with the client's own words (its
// rate limiter refuses a wait that would pass the deadline) instead of
// saying the wait timed out.
func (a *app) follow(ctx context.Context, s *session, name string, timeout time.Duration, p *progress, c check) error {
	// expired is closed, not sent on, so the watch and this loop both
	// see it.
	expired := make(chan struct{})
	if timeout > 0 {
		t := time.AfterFunc(timeout, func() { close(expired) })
		defer t.Stop()
	}
	// seen is what each version of the environment says; done ends the
	// follow with err.
	seen := func(env *v1alpha1.DevEnvironment) (bool, error) {
		state, done, err := c(env)
		p.show(state)
		return done, err
	}
	interrupted := func() error {
		select {
		case <-expired:
			return &ExitError{Code: 1, Err: fmt.Errorf("%w after %s: %s", errTimeout, seconds(p.elapsed()), p.last)}
		case <-ctx.Done():
			return &ExitError{Code: 130, Err: errors.New("interrupted: " + p.last)}
		default:
			return nil
		}
	}
	for {
		readCtx, cancel := context.WithTimeout(ctx, maxRead)
		env, err := s.getEnv(readCtx, name)
		cancel()
		if err != nil && ctx.Err() == nil {
			return err
		}
		if env != nil {
			if done, err := seen(env); done {
				return err
			}
			done, err := a.followWatch(ctx, s, env, expired, seen)
			if done {
				return err
			}
			if err := interrupted(); err != nil {
				return err
			}
		}
		select {
		case <-expired:
		case <-ctx.Done():
		case <-time.After(a.opts.PollInterval):
		}
		if err := interrupted(); err != nil {
			return err
		}
	}
}

// conditionOf returns the condition of type t if it describes the
// current generation.
func conditionOf(env *v1alpha1.DevEnvironment, t string) *metav1.Condition {
	c := meta.FindStatusCondition(env.Status.Conditions, t)
	if c == nil || c.ObservedGeneration != env.Generation {
		return nil
	}
	return c
}

// stalled is the Stalled condition when it is True for this generation.
func stalled(env *v1alpha1.DevEnvironment) *metav1.Condition {
	if c := conditionOf(env, v1alpha1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
		return c
	}
	return nil
}

// ready says whether the environment is Ready for its current spec.
func ready(env *v1alpha1.DevEnvironment) bool {
	c := conditionOf(env, v1alpha1.ConditionReady)
	return env.Status.ObservedGeneration == env.Generation && c != nil && c.Status == metav1.ConditionTrue
}

package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/ui"
)

// uiActions are the dashboard's actions done with the plugin's own code
// and the user's session: a trigger from the page is the same
// exactly-once write as `kubectl devloop trigger` (setTrigger: never over
// a pending trigger, optimistic lock), logs are read as `kubectl devloop
// logs` finds them.
type uiActions struct {
	a *app
	s *session

	objOnce   sync.Once
	objClient client.Client
	objErr    error
}

var _ ui.Actions = (*uiActions)(nil)

// in is the session for another namespace (the page names it).
func (u *uiActions) in(namespace string) *session {
	s := *u.s
	s.namespace = namespace
	return &s
}

func (u *uiActions) Trigger(ctx context.Context, namespace, name, suite string, params map[string]string) (string, error) {
	s := u.in(namespace)
	env, err := s.getEnv(ctx, name)
	if err != nil {
		return "", err
	}
	if err := declaredSuite(env, suite); err != nil {
		return "", err
	}
	var flags []string
	for k, v := range params {
		flags = append(flags, k+"="+v)
	}
	slices.Sort(flags)
	value, err := triggerValue(env, []string{suite}, flags)
	if err != nil {
		return "", err
	}
	if _, err := u.a.setTrigger(ctx, s, name, value, newProgress(io.Discard, time.Hour)); err != nil {
		return "", err
	}
	return value, nil
}

func (u *uiActions) Cancel(ctx context.Context, namespace, name, suite string) (string, error) {
	s := u.in(namespace)
	env, err := s.getEnv(ctx, name)
	if err != nil {
		return "", err
	}
	if err := declaredSuite(env, suite); err != nil {
		return "", err
	}
	run := newestRunAfter(env, suite, 0)
	if run == nil || finished(run) {
		return "", fmt.Errorf("nothing to cancel: %s is not running", suite)
	}
	value := "cancel:" + suite
	if _, err := u.a.setTrigger(ctx, s, name, value, newProgress(io.Discard, time.Hour)); err != nil {
		return "", err
	}
	return value, nil
}

// Component is `kubectl devloop up|down ENV COMPONENT`, `kubectl
// devloop debug ENV COMPONENT[/IMAGE] --no-forward [--off]`, and the
// page's Rebuild: the reconcile request `kubectl devloop push` makes
// after its push (requestReconcile, one write as the user).
func (u *uiActions) Component(ctx context.Context, namespace, name, target, action string) (string, error) {
	s := u.in(namespace)
	switch action {
	case "up", "down":
		value, changed, err := setUpList(ctx, s, name, []string{target}, "", action == "up")
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%s %s (%s=%q)", action, strings.Join(changed, ", "), v1alpha1.UpAnnotation, value), nil
	case "rebuild":
		env, err := s.getEnv(ctx, name)
		if err != nil {
			return "", err
		}
		if err := rebuildTarget(env, target); err != nil {
			return "", err
		}
		// The request's value: the page follows status until the
		// operator says it handled it (lastHandledReconcileAt).
		return requestReconcile(ctx, s, env, nil)
	case "debug-on", "debug-off":
		env, err := s.getEnv(ctx, name)
		if err != nil {
			return "", err
		}
		t, err := debugTarget(env, target)
		if err != nil {
			return "", err
		}
		value, err := setDebugTarget(ctx, s, name, t, action == "debug-on")
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%s=%q", v1alpha1.DebugAnnotation, value), nil
	}
	return "", fmt.Errorf("unknown action %q", action)
}

// Logs runs the `logs` command's code with its output turned into lines
// for the page: "[pod/container] text" becomes a line of that stream.
func (u *uiActions) Logs(ctx context.Context, namespace, name string, t ui.LogTarget, emit func(ui.LogLine)) error {
	s := u.in(namespace)
	env, err := s.getEnv(ctx, name)
	if err != nil {
		return err
	}
	switch {
	case t.Kind == "all":
		return (&allLogs{a: u.a, s: s, envName: name, emit: emit}).run(ctx)
	case t.Kind == "build" && !strings.Contains(t.Name, "/"):
		return fmt.Errorf("a build log is named COMPONENT/IMAGE, not %q", t.Name)
	case t.Kind == "test":
		if err := declaredSuite(env, t.Name); err != nil {
			return err
		}
	case t.Kind == "component" && env.Spec.Component(t.Name) == nil:
		return fmt.Errorf("devenvironment/%s has no component %q", name, t.Name)
	}
	target, err := logsTargetOf(env, t.Name, t.Run)
	if err != nil {
		return err
	}
	if t.Kind == "component" {
		pl := &podLogs{a: u.a, s: s, envName: name, target: target, container: t.Container, emit: emit}
		return pl.run(ctx, t.Follow)
	}
	return u.a.jobLogs(ctx, s, env, target, emit, &logsFlags{follow: t.Follow, container: t.Container, tail: -1})
}

// jobLogs is the `logs` command's reading of a build's or a test run's
// pods with the kubelet's timestamps, its output turned into lines for
// the page that carry the time the pod wrote them.
func (a *app) jobLogs(ctx context.Context, s *session, env *v1alpha1.DevEnvironment, target *logsTarget, emit func(ui.LogLine), f *logsFlags) error {
	b := *a
	b.streams = genericiooptions.IOStreams{Out: &lineEmitter{emit: emit, timestamps: true}, ErrOut: &lineEmitter{emit: emit, stream: "devloop"}}
	f.timestamps = true
	return b.printLogs(ctx, s, env, target, f)
}

// lineEmitter turns the lines the logs code prints into LogLines. With
// timestamps, each line's text (after any [pod/container] prefix) starts
// with the kubelet's time, which becomes the line's time.
type lineEmitter struct {
	mu         sync.Mutex
	emit       func(ui.LogLine)
	stream     string
	timestamps bool
	rest       string
}

func (l *lineEmitter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	text := l.rest + string(p)
	lines := strings.Split(text, "\n")
	l.rest = lines[len(lines)-1]
	// A line without end (a binary log) is passed on in pieces rather
	// than held without bound; the ring cuts each piece further.
	if len(l.rest) > 64<<10 {
		lines[len(lines)-1] = l.rest
		lines = append(lines, "")
		l.rest = ""
	}
	for _, line := range lines[:len(lines)-1] {
		ll := ui.LogLine{Stream: l.stream, Text: line, Time: time.Now()}
		if strings.HasPrefix(line, "[") {
			if st, rest, ok := strings.Cut(line[1:], "] "); ok && !strings.ContainsAny(st, " ") {
				ll.Stream, ll.Text = st, rest
			}
		}
		if l.timestamps {
			ll.Time, ll.Text = splitTimestamp(ll.Text)
		}
		l.emit(ll)
	}
	return len(p), nil
}

// rebuildTarget checks COMPONENT or COMPONENT/IMAGE names a declared
// component (and image): a rebuild of a typo is refused, not a reconcile.
func rebuildTarget(env *v1alpha1.DevEnvironment, target string) error {
	comp, image, _ := strings.Cut(target, "/")
	c := env.Spec.Component(comp)
	if c == nil {
		return fmt.Errorf("devenvironment/%s has no component %q", env.Name, comp)
	}
	if image == "" {
		return nil
	}
	for _, im := range c.Images {
		if im.Name == image {
			return nil
		}
	}
	return fmt.Errorf("component %s has no image %q", comp, image)
}

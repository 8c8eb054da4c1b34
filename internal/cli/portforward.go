package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// newPortForwardCommand is `port-forward ENV [COMPONENT...]`: every
// components[].ports entry of the selected components open at once.
func newPortForwardCommand(a *app) *cobra.Command {
	var label string
	cmd := &cobra.Command{
		Use:   "port-forward ENV [COMPONENT...]",
		Short: "Keep the components' declared ports (components[].ports) open on localhost",
		Long: `Forward every port the components declare (components[].ports: name, local,
target svc/NAME:PORT, deploy/NAME:PORT, sts/NAME:PORT or pod/NAME:PORT) from
localhost to a Ready pod behind the target, through the API server as you. A
Service's port is followed to its targetPort (a number or a container port
name). The forwards follow rollouts: when the pod goes away or is not Ready,
new connections go to a new Ready pod (a line says so); when the cluster is
away they reconnect with backoff. Without COMPONENT or -l, all components'
ports. Runs until Ctrl-C.`,
		Example: `  kubectl devloop port-forward volcano
  kubectl devloop port-forward volcano -l monitoring
  kubectl devloop port-forward volcano grafana`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, env, err := a.connectTo(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			fws, err := forwardsOf(env, args[1:], label)
			if err != nil {
				return err
			}
			return a.portForward(cmd.Context(), s, fws)
		},
	}
	cmd.Flags().StringVarP(&label, "selector", "l", "", "forward the ports of the components with this label (components[].labels)")
	return cmd
}

// forwardsOf is the forwards of the named (or labelled, or else all)
// components of env, refusing unknown names and a selection without ports.
func forwardsOf(env *v1alpha1.DevEnvironment, names []string, label string) ([]*forwarder, error) {
	var withPorts []string
	for _, c := range env.Spec.Components {
		if len(c.Ports) > 0 {
			withPorts = append(withPorts, c.Name)
		}
	}
	for _, n := range names {
		if !slices.ContainsFunc(env.Spec.Components, func(c v1alpha1.Component) bool { return c.Name == n }) {
			return nil, fmt.Errorf("devenvironment/%s has no component %s; those with ports: %s", env.Name, n, portsOrNone(withPorts))
		}
	}
	var fws []*forwarder
	for i, c := range env.Spec.Components {
		if len(names) > 0 && !slices.Contains(names, c.Name) {
			continue
		}
		if label != "" && !slices.Contains(c.Labels, label) {
			continue
		}
		for j, p := range c.Ports {
			t, err := parseForwardTarget(p.Target)
			if err != nil {
				return nil, fmt.Errorf("spec.components[%d].ports[%d].target: %w", i, j, err)
			}
			fws = append(fws, &forwarder{
				name: p.Name, component: c.Name, namespace: forwardNamespace(env, &c, p),
				target: t, local: p.Local,
			})
		}
	}
	if len(fws) == 0 {
		what := "no component declares ports (components[].ports)"
		switch {
		case label != "":
			what = "no component with label " + label + " declares ports"
		case len(names) > 0:
			what = "components " + strings.Join(names, ", ") + " declare no ports"
		}
		return nil, fmt.Errorf("devenvironment/%s: %s; those with ports: %s", env.Name, what, portsOrNone(withPorts))
	}
	return fws, nil
}

// forwardNamespace is where a forward's target lives: its own namespace,
// else the component's release or manifests namespace, else the
// environment's.
func forwardNamespace(env *v1alpha1.DevEnvironment, c *v1alpha1.Component, p v1alpha1.PortForward) string {
	switch {
	case p.Namespace != "":
		return p.Namespace
	case c.DeployNamespace() != "":
		return c.DeployNamespace()
	}
	return env.Namespace
}

// portForward binds every local port first (one in use fails the whole
// command before anything is forwarded), then forwards until ctx ends.
func (a *app) portForward(ctx context.Context, s *session, fws []*forwarder) error {
	if err := bindForwards(fws); err != nil {
		return err
	}
	a.serveForwards(ctx, s, fws)
	return nil
}

// bindForwards listens on every forward's local port, or on none: a port
// declared twice or in use fails them all.
func bindForwards(fws []*forwarder) error {
	seen := map[int32]string{}
	for _, f := range fws {
		if other, dup := seen[f.local]; dup {
			return fmt.Errorf("local port %d is declared twice: port-forward %s of component %s and %s", f.local, f.name, f.component, other)
		}
		seen[f.local] = fmt.Sprintf("port-forward %s of component %s", f.name, f.component)
	}
	var errs []error
	for _, f := range fws {
		if err := f.listen(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		for _, f := range fws {
			f.close()
		}
		return err
	}
	return nil
}

// serveForwards forwards the bound ports until ctx ends.
func (a *app) serveForwards(ctx context.Context, s *session, fws []*forwarder) {
	log := &syncWriter{w: a.out()}
	poll := max(a.opts.PollInterval, 200*time.Millisecond)
	var wg sync.WaitGroup
	for _, f := range fws {
		f.s, f.log, f.poll = s, log, poll
		wg.Go(func() { f.run(ctx) })
	}
	wg.Wait()
	fmt.Fprintln(a.out(), "stopped port-forwards")
}

// startPortForwards forwards the ports of env's components (those with
// label, if any) in the background, as `push --watch` does while it
// watches; the returned function stops them and waits. An environment
// without ports forwards nothing, silently; other errors are printed.
func (a *app) startPortForwards(ctx context.Context, s *session, envName, label string) (stop func()) {
	env, err := s.getEnv(ctx, envName)
	if err != nil {
		fmt.Fprintln(a.errOut(), "port-forward:", err)
		return func() {}
	}
	fws, err := forwardsOf(env, nil, label)
	if err != nil {
		return func() {} // no ports declared: nothing to forward
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := a.portForward(ctx, s, fws); err != nil {
			fmt.Fprintln(a.errOut(), "port-forward:", err)
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

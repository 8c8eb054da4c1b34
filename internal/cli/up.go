package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/plan"
)

func newUpCommand(a *app) *cobra.Command   { return newUpDownCommand(a, true) }
func newDownCommand(a *app) *cobra.Command { return newUpDownCommand(a, false) }

// newUpDownCommand is `up` (bring on-demand components up) or `down`
// (turn them off again, removing what they deployed). Both edit the
// devloop.dev/up annotation the operator reads.
func newUpDownCommand(a *app, up bool) *cobra.Command {
	var label string
	var wait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "up ENV [COMPONENT...]",
		Short: "Bring on-demand components up (and the on-demand components they depend on)",
		Long: `Add on-demand components (onDemand: true) to the environment's devloop.dev/up
annotation: the operator builds and deploys them, and they stay up until
` + "`kubectl devloop down`" + `. The on-demand components they depend on come up too.
-l selects the on-demand components with a label. A component that is not on
demand, or unknown, is refused naming the on-demand ones. --wait follows them
until Ready (exit 1 if one fails).`,
		Example: `  kubectl devloop up volcano kwok
  kubectl devloop up volcano -l monitoring --wait`,
	}
	if !up {
		cmd.Use = "down ENV [COMPONENT...]"
		cmd.Short = "Turn on-demand components off, removing what they deployed"
		cmd.Long = `Remove on-demand components from the environment's devloop.dev/up annotation:
the operator removes what they deployed and shows them Disabled. The on-demand
components that depend on them go down too. -l selects the on-demand
components with a label.`
		cmd.Example = `  kubectl devloop down volcano kwok`
	}
	cmd.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 || (len(args) == 1 && label == "") {
			return errors.New("want ENV and at least one COMPONENT (or -l LABEL)")
		}
		return nil
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		s, err := a.connect()
		if err != nil {
			return err
		}
		ctx := cmd.Context()
		name := args[0]
		value, changed, err := setUpList(ctx, s, name, args[1:], label, up)
		if err != nil {
			return err
		}
		verb := "up"
		if !up {
			verb = "down"
		}
		fmt.Fprintf(a.out(), "devenvironment/%s %s: %s (%s=%q)\n", name, verb, strings.Join(changed, ", "), v1alpha1.UpAnnotation, value)
		if !up || !wait {
			return nil
		}
		return a.waitComponentsReady(ctx, s, name, changed, timeout)
	}
	cmd.Flags().StringVarP(&label, "selector", "l", "", "select the on-demand components with this label (components[].labels)")
	if up {
		cmd.Flags().BoolVar(&wait, "wait", false, "follow the components until Ready")
		cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "with --wait, how long to wait")
	}
	return cmd
}

// setUpList brings the named (or labelled) on-demand components up, with
// the on-demand ones they depend on, or down, with the ones up that
// depend on them, in the devloop.dev/up annotation; it returns the
// annotation's value and the components changed. Shared by up, down and
// the dashboard.
func setUpList(ctx context.Context, s *session, name string, names []string, label string, up bool) (string, []string, error) {
	var value string
	var changed []string
	for {
		env, err := s.getEnv(ctx, name)
		if err != nil {
			return "", nil, err
		}
		selected, err := selectOnDemand(env, names, label)
		if err != nil {
			return "", nil, err
		}
		current := env.UpComponents()
		var next []string
		if up {
			if selected, err = withOnDemandDependencies(env, selected); err != nil {
				return "", nil, err
			}
			next = append(slices.Clone(current), selected...)
		} else {
			if selected, err = withUpDependents(env, selected, current); err != nil {
				return "", nil, err
			}
			next = slices.DeleteFunc(slices.Clone(current), func(n string) bool { return slices.Contains(selected, n) })
		}
		value = v1alpha1.FormatUpList(next)
		changed = selected
		if value == v1alpha1.FormatUpList(current) {
			break // nothing to write: up (or down) already
		}
		patched := env.DeepCopy()
		if patched.Annotations == nil {
			patched.Annotations = map[string]string{}
		}
		if value == "" {
			delete(patched.Annotations, v1alpha1.UpAnnotation)
		} else {
			patched.Annotations[v1alpha1.UpAnnotation] = value
		}
		// With the resourceVersion read: a change in between (the
		// operator bringing components up for a test) is not lost.
		err = s.client.Patch(ctx, patched, client.MergeFromWithOptions(env, client.MergeFromWithOptimisticLock{}))
		if err == nil {
			break
		}
		if !apierrors.IsConflict(err) {
			return "", nil, fmt.Errorf("setting %s on devenvironment/%s: %w", v1alpha1.UpAnnotation, name, err)
		}
	}
	return value, changed, nil
}

// selectOnDemand resolves names and a label to on-demand components of
// env, refusing unknown ones and those not on demand by name.
func selectOnDemand(env *v1alpha1.DevEnvironment, names []string, label string) ([]string, error) {
	var onDemand []string
	for _, c := range env.Spec.Components {
		if c.OnDemand {
			onDemand = append(onDemand, c.Name)
		}
	}
	refuse := func(format string, args ...any) error {
		theirs := "it has none"
		if len(onDemand) > 0 {
			theirs = "its on-demand components are " + strings.Join(onDemand, ", ")
		}
		return fmt.Errorf(format+": %s", append(args, theirs)...)
	}
	var out []string
	for _, n := range names {
		c := specComponent(env, n)
		switch {
		case c == nil:
			return nil, refuse("devenvironment/%s has no component %q", env.Name, n)
		case !c.OnDemand:
			return nil, refuse("component %s of devenvironment/%s is not on demand (onDemand: true)", n, env.Name)
		}
		out = append(out, n)
	}
	if label != "" {
		found := false
		for _, c := range env.Spec.Components {
			if c.OnDemand && slices.Contains(c.Labels, label) {
				out, found = append(out, c.Name), true
			}
		}
		if !found {
			return nil, refuse("no on-demand component of devenvironment/%s has the label %q", env.Name, label)
		}
	}
	return v1alpha1.ParseUpList(strings.Join(out, ",")), nil
}

// withOnDemandDependencies adds the on-demand components names depend
// on, directly or not, as the operator's plan sees dependencies (implicit
// edges included).
func withOnDemandDependencies(env *v1alpha1.DevEnvironment, names []string) ([]string, error) {
	p, err := plan.Build(&env.Spec)
	if err != nil {
		return nil, fmt.Errorf("devenvironment/%s: %w", env.Name, err)
	}
	out := slices.Clone(names)
	next := slices.Clone(names)
	for len(next) > 0 {
		n := next[len(next)-1]
		next = next[:len(next)-1]
		for _, d := range p.Graph.DependsOn(n) {
			if c := p.Components[d]; c != nil && c.OnDemand && !slices.Contains(out, d) {
				out = append(out, d)
			}
			next = append(next, d)
		}
	}
	return v1alpha1.ParseUpList(strings.Join(out, ",")), nil
}

// withUpDependents adds the components in up that depend, directly or
// not, on names: with those down they could only be Blocked, so they go
// down too.
func withUpDependents(env *v1alpha1.DevEnvironment, names, up []string) ([]string, error) {
	p, err := plan.Build(&env.Spec)
	if err != nil {
		return nil, fmt.Errorf("devenvironment/%s: %w", env.Name, err)
	}
	out := slices.Clone(names)
	next := slices.Clone(names)
	seen := map[string]bool{}
	for len(next) > 0 {
		n := next[len(next)-1]
		next = next[:len(next)-1]
		for _, d := range p.Graph.Dependents(n) {
			if seen[d] {
				continue
			}
			seen[d] = true
			if slices.Contains(up, d) && !slices.Contains(out, d) {
				out = append(out, d)
			}
			next = append(next, d)
		}
	}
	return v1alpha1.ParseUpList(strings.Join(out, ",")), nil
}

// specComponent is the spec of a component, or nil.
func specComponent(env *v1alpha1.DevEnvironment, name string) *v1alpha1.Component {
	for i := range env.Spec.Components {
		if env.Spec.Components[i].Name == name {
			return &env.Spec.Components[i]
		}
	}
	return nil
}

// waitComponentsReady follows components until all are Ready, failing
// when one fails.
func (a *app) waitComponentsReady(ctx context.Context, s *session, name string, names []string, timeout time.Duration) error {
	p := newProgress(a.out(), a.opts.ProgressInterval)
	err := a.follow(ctx, s, name, timeout, p, func(env *v1alpha1.DevEnvironment) (string, bool, error) {
		var states []string
		done := true
		for _, n := range names {
			st := env.Status.Component(n)
			phase := v1alpha1.PhasePending
			if st != nil {
				phase = st.Phase
			}
			states = append(states, n+" "+string(phase))
			if st != nil && st.Phase == v1alpha1.PhaseFailed {
				return "", true, failed("component %s failed: %s", n, st.Message)
			}
			done = done && st.Ready()
		}
		return strings.Join(states, ", "), done, nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(a.out(), "%s Ready in %s\n", strings.Join(names, ", "), seconds(p.elapsed()))
	return nil
}

// offComponents are the components the operator leaves Disabled
// (enabled: false, or on demand and not up) and those depending on one,
// directly or not, which stay Blocked: nothing rolls them out, so a push
// does not wait for them.
func offComponents(p *plan.Plan, env *v1alpha1.DevEnvironment) map[string]bool {
	up := env.UpComponents()
	off := map[string]bool{}
	for _, n := range p.ComponentOrder() {
		off[n] = !p.Components[n].IsEnabled(up)
		for _, d := range p.Graph.DependsOn(n) {
			off[n] = off[n] || off[d]
		}
	}
	return off
}

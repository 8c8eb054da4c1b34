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
)

// newDebugCommand is `debug ENV COMPONENT[/IMAGE]`: it puts an image in
// debug mode (or out of it, --off) by the devloop.dev/debug annotation.
// The operator builds the image from build.DebugImageSpec and the deploy
// engine runs its containers under delve (deploy.BuiltImage.Debug); this
// command then waits for a pod running the debug build and forwards a
// local port to delve's until Ctrl-C.
func newDebugCommand(a *app) *cobra.Command {
	var (
		off, noForward bool
		port           int
		timeout        time.Duration
	)
	cmd := &cobra.Command{
		Use:   "debug ENV COMPONENT[/IMAGE]",
		Short: "Run an image built by a Go run step under delve and forward its port (--off: back to the normal build)",
		Long: `Put an image in debug mode: the operator rebuilds it with
GOFLAGS='-gcflags=all=-N -l' (a Makefile that sets GOFLAGS itself defeats
this), adds delve at /dlv, and runs the containers using it under
"dlv exec --headless --listen=127.0.0.1:40000 --only-same-user=false --accept-multiclient --continue"
(their liveness probes removed): delve has no authentication, so it listens
on the pod's loopback only, which a port-forward reaches and other pods do not. IMAGE may be left out when the component
has one image with a run step.

The command then waits until the debug build is deployed and a pod running
it is Ready, forwards localhost:40000 (--port) to delve in that pod
(following the workload's next rollouts), prints how to attach, and stays
until Ctrl-C. The image stays in debug mode after Ctrl-C; --off returns it
to the normal build. --no-forward only writes the annotation.`,
		Example: `  kubectl devloop debug team api
  kubectl devloop debug team api/server --port 2345
  kubectl devloop debug team api --no-forward
  kubectl devloop debug team api/server --off`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return errors.New("want ENV and COMPONENT[/IMAGE]")
			}
			return nil
		},
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if port < 1 || port > 65535 {
			return fmt.Errorf("--port %d: want a port from 1 to 65535", port)
		}
		ctx := cmd.Context()
		name := args[0]
		s, env, err := a.connectTo(ctx, name)
		if err != nil {
			return err
		}
		target, err := debugTarget(env, args[1])
		if err != nil {
			return err
		}
		forward := !off && !noForward
		var f *forwarder
		if forward {
			// The local port first: one in use fails before anything is
			// written.
			f = &forwarder{name: "dlv", component: target.Component, local: int32(port), raw: true, portHint: "pick another with --port"}
			if err := bindForwards([]*forwarder{f}); err != nil {
				return err
			}
			defer f.close()
		}
		value, err := setDebugTarget(ctx, s, name, target, !off)
		if err != nil {
			return err
		}
		if off {
			fmt.Fprintf(a.out(), "devenvironment/%s: %s back to the normal build (%s=%q)\n", name, target, v1alpha1.DebugAnnotation, value)
			return nil
		}
		fmt.Fprintf(a.out(), "devenvironment/%s: %s in debug mode (%s=%q)\n", name, target, v1alpha1.DebugAnnotation, value)
		if !forward {
			fmt.Fprint(a.out(), attachHelp(port, false))
			return nil
		}
		pod, err := a.waitForDebugPod(ctx, s, name, target, timeout)
		if err != nil {
			return err
		}
		f.namespace, f.target = pod.Namespace, debugForwardTarget(ctx, s.client, pod)
		fmt.Fprint(a.out(), attachHelp(port, true))
		fmt.Fprintf(a.out(), "Ctrl-C stops forwarding; %s stays in debug mode until `kubectl devloop debug %s %s --off`.\n", target, name, target)
		a.serveForwards(ctx, s, []*forwarder{f})
		return nil
	}
	cmd.Flags().BoolVar(&off, "off", false, "return the image to the normal build")
	cmd.Flags().BoolVar(&noForward, "no-forward", false, "only put the image in debug mode: do not wait for it nor forward delve's port")
	cmd.Flags().IntVar(&port, "port", v1alpha1.DebugPort, "local port forwarded to delve's")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "give up waiting for the debug build's pod after this long (0: until Ctrl-C)")
	return cmd
}

// setDebugTarget adds target to the environment's debug annotation (or
// removes it) with the resourceVersion read, so another entry written in
// between is not lost, and returns the annotation's value.
func setDebugTarget(ctx context.Context, s *session, name string, target v1alpha1.DebugTarget, on bool) (string, error) {
	for {
		env, err := s.getEnv(ctx, name)
		if err != nil {
			return "", err
		}
		current, _ := v1alpha1.ParseDebugList(env.Annotations[v1alpha1.DebugAnnotation])
		next := slices.DeleteFunc(slices.Clone(current), func(t v1alpha1.DebugTarget) bool { return t == target })
		if on {
			next = append(next, target)
		}
		value := v1alpha1.FormatDebugList(next)
		if value == env.Annotations[v1alpha1.DebugAnnotation] {
			return value, nil // already so
		}
		patched := env.DeepCopy()
		if patched.Annotations == nil {
			patched.Annotations = map[string]string{}
		}
		if value == "" {
			delete(patched.Annotations, v1alpha1.DebugAnnotation)
		} else {
			patched.Annotations[v1alpha1.DebugAnnotation] = value
		}
		err = s.client.Patch(ctx, patched, client.MergeFromWithOptions(env, client.MergeFromWithOptimisticLock{}))
		if err == nil {
			return value, nil
		}
		if !apierrors.IsConflict(err) {
			return "", fmt.Errorf("setting %s on devenvironment/%s: %w", v1alpha1.DebugAnnotation, name, err)
		}
	}
}

// debugTarget resolves COMPONENT[/IMAGE] to an image of env with a run
// step, refusing unknown names and images without one.
func debugTarget(env *v1alpha1.DevEnvironment, arg string) (v1alpha1.DebugTarget, error) {
	comp, img, _ := strings.Cut(arg, "/")
	c := specComponent(env, comp)
	if c == nil {
		return v1alpha1.DebugTarget{}, fmt.Errorf("devenvironment/%s has no component %q", env.Name, comp)
	}
	var withRun []string
	for _, i := range c.Images {
		if i.Run != nil {
			withRun = append(withRun, i.Name)
		}
	}
	theirs := "it has no image with a run step (images[].run)"
	if len(withRun) > 0 {
		theirs = "its images with a run step are " + strings.Join(withRun, ", ")
	}
	switch {
	case img == "" && len(withRun) == 1:
		img = withRun[0]
	case img == "":
		return v1alpha1.DebugTarget{}, fmt.Errorf("component %s: say which image, COMPONENT/IMAGE: %s", comp, theirs)
	case !slices.Contains(withRun, img):
		return v1alpha1.DebugTarget{}, fmt.Errorf("component %s has no image %q with a run step: %s", comp, img, theirs)
	}
	return v1alpha1.DebugTarget{Component: comp, Image: img}, nil
}

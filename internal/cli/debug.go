package cli

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// newDebugCommand is `debug ENV COMPONENT[/IMAGE]`: it puts an image in
// debug mode (or out of it, --off) by the devloop.dev/debug annotation.
// The operator builds the image from build.DebugImageSpec and the deploy
// engine runs its containers under delve (deploy.BuiltImage.Debug). The
// port is not forwarded here yet: the output says how.
func newDebugCommand(a *app) *cobra.Command {
	var off bool
	cmd := &cobra.Command{
		Use:   "debug ENV COMPONENT[/IMAGE]",
		Short: "Run an image built by a Go run step under delve (--off: back to the normal build)",
		Long: `Put an image in debug mode: the operator rebuilds it with
GOFLAGS='-gcflags=all=-N -l' (a Makefile that sets GOFLAGS itself defeats
this), adds delve at /dlv, and runs the containers using it under
"dlv exec --headless --listen=:40000 --accept-multiclient --continue"
(their liveness probes removed). IMAGE may be left out when the component
has one image with a run step. --off returns to the normal build.`,
		Example: `  kubectl devloop debug team api
  kubectl devloop debug team api/server --off`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return errors.New("want ENV and COMPONENT[/IMAGE]")
			}
			return nil
		},
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		s, err := a.connect()
		if err != nil {
			return err
		}
		ctx := cmd.Context()
		name := args[0]
		var target v1alpha1.DebugTarget
		var value string
		for {
			env, err := s.getEnv(ctx, name)
			if err != nil {
				return err
			}
			if target, err = debugTarget(env, args[1]); err != nil {
				return err
			}
			current, _ := v1alpha1.ParseDebugList(env.Annotations[v1alpha1.DebugAnnotation])
			next := slices.DeleteFunc(slices.Clone(current), func(t v1alpha1.DebugTarget) bool { return t == target })
			if !off {
				next = append(next, target)
			}
			value = v1alpha1.FormatDebugList(next)
			if value == env.Annotations[v1alpha1.DebugAnnotation] {
				break // already so
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
			// With the resourceVersion read, so another entry written in
			// between is not lost.
			err = s.client.Patch(ctx, patched, client.MergeFromWithOptions(env, client.MergeFromWithOptimisticLock{}))
			if err == nil {
				break
			}
			if !apierrors.IsConflict(err) {
				return fmt.Errorf("setting %s on devenvironment/%s: %w", v1alpha1.DebugAnnotation, name, err)
			}
		}
		if off {
			fmt.Fprintf(a.out(), "devenvironment/%s: %s back to the normal build (%s=%q)\n", name, target, v1alpha1.DebugAnnotation, value)
			return nil
		}
		fmt.Fprintf(a.out(), "devenvironment/%s: %s in debug mode (%s=%q)\n", name, target, v1alpha1.DebugAnnotation, value)
		fmt.Fprint(a.out(), attachHelp(v1alpha1.DebugPort))
		return nil
	}
	cmd.Flags().BoolVar(&off, "off", false, "return the image to the normal build")
	return cmd
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

// attachHelp says how to attach to delve once its port is forwarded.
func attachHelp(port int) string {
	return fmt.Sprintf(`Once the image is rebuilt and rolled out, forward the port (kubectl port-forward deploy/NAME %[1]d) and attach:
  dlv connect localhost:%[1]d
VS Code (launch.json):
  {"name": "devloop", "type": "go", "request": "attach", "mode": "remote", "host": "127.0.0.1", "port": %[1]d}
`, port)
}

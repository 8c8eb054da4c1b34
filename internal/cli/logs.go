package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// logsFlags are the options of `logs`.
type logsFlags struct {
	run       int64
	follow    bool
	container string
	tail      int64
	label     string
	// timestamps asks the kubelet to put the time it took each line
	// before it (timestamps=true): the dashboard shows it, no flag sets it.
	timestamps bool
}

func newLogsCommand(a *app) *cobra.Command {
	f := &logsFlags{}
	cmd := &cobra.Command{
		Use:   "logs ENV COMPONENT|SUITE|COMPONENT/IMAGE | logs ENV -l LABEL",
		Short: "Logs of a component's pods, a test run, or an image's build",
		Long: `Print the logs of:
  COMPONENT         the pods of what the component deployed: the workloads
                    (Deployments, StatefulSets, DaemonSets, ReplicaSets, Jobs,
                    Pods) among its applied manifests (status inventory) or in
                    its Helm release (as status records them; pods labelled
                    app.kubernetes.io/instance=<release> otherwise);
  SUITE             a test run's Job: the latest run, or --run N;
  COMPONENT/IMAGE   the latest build of one of the component's images: its
                    builder Job's pods, or, for a warm builder
                    (run.keepWarm), the build command's output in the warm
                    builder pod's build container since the build started.
  -l LABEL          the pods of every component with the label
                    (components[].labels), together.
Each container of each pod, init containers first; lines are prefixed with
[pod/container] when there is more than one. --follow streams until Ctrl-C
(and waits for a test run's or a build's pod to start); a warm build is
followed until it ends.`,
		Example: `  kubectl devloop logs volcano scheduler
  kubectl devloop logs volcano unit-tests --run 3
  kubectl devloop logs volcano e2e-tests-all -f
  kubectl devloop logs volcano scheduler/scheduler   # the image's build
  kubectl devloop logs volcano -l core -f`,
		Args: func(cmd *cobra.Command, args []string) error {
			if f.label != "" {
				if len(args) != 1 {
					return fmt.Errorf("with -l %s, want ENV only (the label selects the components), got %d arguments", f.label, len(args))
				}
				return nil
			}
			return cobra.ExactArgs(2)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			s, env, err := a.connectTo(ctx, args[0])
			if err != nil {
				return err
			}
			if f.label != "" {
				return a.printLabelledLogs(ctx, s, env, f.label, f)
			}
			t, err := logsTargetOf(env, args[1], f.run)
			if err != nil {
				return err
			}
			return a.printLogs(ctx, s, env, t, f)
		},
	}
	cmd.Flags().Int64Var(&f.run, "run", 0, "with a SUITE: the run number (default: the latest run)")
	cmd.Flags().BoolVarP(&f.follow, "follow", "f", false, "stream the logs until Ctrl-C")
	cmd.Flags().StringVarP(&f.container, "container", "c", "", "only this container")
	cmd.Flags().Int64Var(&f.tail, "tail", -1, "only the last lines of each container (-1: all)")
	cmd.Flags().StringVarP(&f.label, "selector", "l", "", "the pods of every component with this label (components[].labels)")
	return cmd
}

// logsTarget is what `logs` reads: a component's workloads, or a Job.
type logsTarget struct {
	what      string // for messages: "component web", "unit #3", "build of web/web"
	component string // set for a component
	job       string // set for a test run
	build     *buildTarget
	noted     bool // the note on a release without workloads was printed
}

// logsTargetOf parses the target word against the environment.
func logsTargetOf(env *v1alpha1.DevEnvironment, word string, run int64) (*logsTarget, error) {
	if comp, image, ok := strings.Cut(word, "/"); ok {
		return imageBuildTarget(env, word, comp, image)
	}
	if specTest(env, word) != nil {
		if run > 0 {
			r := env.Status.Test(word).Run(run)
			if r == nil {
				return nil, fmt.Errorf("suite %s has no run #%d in status (runs kept: %s)", word, run, runNumbers(env, word))
			}
			return runTarget(word, r)
		}
		r := newestRunAfter(env, word, 0)
		if r == nil {
			return nil, fmt.Errorf("suite %s has not run yet: start it with `kubectl devloop trigger %s %s`", word, env.Name, word)
		}
		return runTarget(word, r)
	}
	if run > 0 {
		return nil, fmt.Errorf("--run is for test suites, and %q is not one of devenvironment/%s's suites", word, env.Name)
	}
	if env.Spec.Component(word) != nil {
		return &logsTarget{what: "component " + word, component: word}, nil
	}
	var names []string
	for _, c := range env.Spec.Components {
		names = append(names, c.Name)
	}
	for _, t := range env.Spec.Tests {
		names = append(names, t.Name)
	}
	return nil, fmt.Errorf("devenvironment/%s has no component or suite %q: it has %s", env.Name, word, strings.Join(names, ", "))
}

func runTarget(suite string, r *v1alpha1.TestRun) (*logsTarget, error) {
	if r.JobName == "" {
		return nil, fmt.Errorf("%s has no Job yet (%s)", runState(suite, r), r.Result)
	}
	return &logsTarget{what: runName(suite, r), job: r.JobName}, nil
}

func runNumbers(env *v1alpha1.DevEnvironment, suite string) string {
	var out []string
	if t := env.Status.Test(suite); t != nil {
		for _, r := range t.Runs {
			out = append(out, fmt.Sprintf("#%d", r.Number))
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// printLogs finds the target's pods (waiting for them with --follow) and
// prints or streams their containers' logs.
func (a *app) printLogs(ctx context.Context, s *session, env *v1alpha1.DevEnvironment, t *logsTarget, f *logsFlags) error {
	p := newProgress(a.errOut(), a.opts.ProgressInterval)
	for {
		pods, err := a.targetPods(ctx, s, env, t)
		if err != nil {
			return err
		}
		if len(pods) > 0 {
			o := streamOptions{container: f.container}
			if b := t.build; b != nil {
				o.container, o.since = b.logOptions(f)
				if b.warm && f.follow {
					var cancel context.CancelFunc
					ctx, cancel = context.WithCancel(ctx)
					go a.followUntilEnded(ctx, s, b, cancel)
				}
			}
			return a.streamPods(ctx, s, pods, f, o)
		}
		if !f.follow {
			if t.build != nil && t.build.name == "" {
				return fmt.Errorf("image %s of component %s has not started building yet: add --follow to wait for its build", t.build.image, t.build.component)
			}
			return fmt.Errorf("%s has no pods (yet): add --follow to wait for them", t.what)
		}
		p.show("waiting for the pods of " + t.what)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(a.opts.PollInterval):
		}
	}
}

package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

func newWaitCommand(a *app) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "wait ENV",
		Short: "Wait until the environment is Ready; exit 1 with the reason when it is Stalled",
		Example: `  kubectl devloop wait volcano --timeout 10m
  make dev-up && kubectl devloop wait volcano && make e2e`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := a.connect()
			if err != nil {
				return err
			}
			p := newProgress(a.out(), a.opts.ProgressInterval)
			err = a.follow(cmd.Context(), s, args[0], timeout, p, waitReady)
			if err == nil {
				fmt.Fprintf(a.out(), "devenvironment/%s Ready in %s\n", args[0], seconds(p.elapsed()))
			}
			return err
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "give up after this long (0: wait until Ready, Stalled or Ctrl-C)")
	return cmd
}

// waitReady is done when the environment is Ready for its current spec, and
// fails when it is Stalled. Meanwhile it reports the Ready message and the
// components that are not Ready.
func waitReady(env *v1alpha1.DevEnvironment) (string, bool, error) {
	if ready(env) {
		return "Ready: " + printable(meta.FindStatusCondition(env.Status.Conditions, v1alpha1.ConditionReady).Message), true, nil
	}
	if c := stalled(env); c != nil {
		return "Stalled (" + c.Reason + ")", true, failed("devenvironment/%s is Stalled (%s): %s", env.Name, c.Reason, c.Message)
	}
	if env.Spec.Suspend {
		return "suspended (spec.suspend is true): it will not become Ready until resumed", false, nil
	}
	return notReadySummary(env), false, nil
}

// notReadySummary says what a not-Ready environment is doing, by component.
func notReadySummary(env *v1alpha1.DevEnvironment) string {
	if env.Status.ObservedGeneration != env.Generation {
		return fmt.Sprintf("waiting for the operator to observe generation %d (observed %d)", env.Generation, env.Status.ObservedGeneration)
	}
	var parts []string
	for _, c := range env.Status.Components {
		if !c.Ready() {
			parts = append(parts, c.Name+" "+string(c.Phase))
		}
	}
	if len(parts) == 0 {
		if c := meta.FindStatusCondition(env.Status.Conditions, v1alpha1.ConditionReady); c != nil {
			return "not Ready: " + firstLine(c.Message)
		}
		return "no status yet: is the devloop operator running?"
	}
	return "components " + env.Status.ComponentsReady + " ready; " + strings.Join(parts, ", ")
}

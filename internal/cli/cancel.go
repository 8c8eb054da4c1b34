package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

func newCancelCommand(a *app) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "cancel ENV SUITE",
		Short: "Cancel the running (or pending) run of a suite and follow it to Cancelled",
		Long: `Set trigger=cancel:<suite> (never over a pending trigger) and follow the
suite's latest run until it ends. Exit 0 when it ends Cancelled, 1 when it
ended otherwise first (it finished before the cancel took effect).`,
		Example: `  kubectl devloop cancel volcano e2e-tests-all`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			name, suite := args[0], args[1]
			s, env, err := a.connectTo(ctx, name)
			if err != nil {
				return err
			}
			if err := declaredSuite(env, suite); err != nil {
				return err
			}
			run := newestRunAfter(env, suite, 0)
			if run == nil || finished(run) {
				last := "it has never run"
				if run != nil {
					last = "its latest run is " + runState(suite, run)
				}
				return fmt.Errorf("nothing to cancel: %s is not running (%s)", suite, last)
			}
			number := run.Number
			p := newProgress(a.out(), a.opts.ProgressInterval)
			value := "cancel:" + suite
			if _, err := a.setTrigger(ctx, s, name, value, p); err != nil {
				return err
			}
			fmt.Fprintf(a.out(), "devenvironment/%s annotated trigger=%s (run #%d)\n", name, value, number)
			var last *v1alpha1.TestRun
			err = a.follow(ctx, s, name, 0, p, func(env *v1alpha1.DevEnvironment) (string, bool, error) {
				r := env.Status.Test(suite).Run(number)
				if r == nil {
					return "", true, failed("run #%d of %s is no longer in status (history limit)", number, suite)
				}
				last = r.DeepCopy()
				return runState(suite, r), finished(r), nil
			})
			if err != nil {
				return err
			}
			if last.Result != v1alpha1.ResultCancelled {
				return failed("%s ended %s before the cancel took effect", runState(suite, last), last.Result)
			}
			fmt.Fprintf(a.out(), "%s #%d cancelled in %s\n", suite, number, seconds(p.elapsed()))
			return nil
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "give up after this long (0: no limit)")
	return cmd
}

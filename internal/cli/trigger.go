package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testrun"
)

func newTriggerCommand(a *app) *cobra.Command {
	var timeout time.Duration
	var noFollow bool
	cmd := &cobra.Command{
		Use:   "trigger ENV SUITE...",
		Short: "Run test suites, follow the runs, exit 0 only if all passed",
		Long: `Set the trigger annotation (trigger=<suites>) and follow the runs it starts
to their results. SUITE is a suite name, "all", or "label:<label>"; several
are joined into one comma list. A trigger still pending (not yet consumed by
the operator) is never overwritten: the command waits for it first.

The exit code is 0 when every run passed, 1 otherwise (Failed, TimedOut,
Cancelled, Error, or --timeout), so scripts and CI can use it.`,
		Example: `  kubectl devloop trigger volcano unit-tests
  kubectl devloop trigger volcano label:e2e --timeout 45m`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := a.connect()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			name, targets := args[0], args[1:]
			env, err := s.getEnv(ctx, name)
			if err != nil {
				return err
			}
			suites, err := expandSuites(env, targets)
			if err != nil {
				return err
			}
			value := strings.Join(targets, ",")
			p := newProgress(a.out(), a.opts.ProgressInterval)
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			before, err := a.setTrigger(ctx, s, name, value, p)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.out(), "devenvironment/%s annotated trigger=%s (suites: %s)\n", name, value, strings.Join(suites, ", "))
			if noFollow {
				return nil
			}
			after := map[string]int64{}
			for _, suite := range suites {
				after[suite] = lastRunNumber(before, suite)
			}
			var runs map[string]*v1alpha1.TestRun
			err = a.follow(ctx, s, name, 0, p, func(env *v1alpha1.DevEnvironment) (string, bool, error) {
				var state string
				var done bool
				runs, state, done = newRunsState(env, suites, after, value)
				return state, done, nil
			})
			if err != nil {
				return err
			}
			return runsOutcome(a, name, suites, runs, p)
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "give up after this long, waiting included (0: no limit)")
	cmd.Flags().BoolVar(&noFollow, "no-follow", false, "only set the annotation; do not wait for the results")
	return cmd
}

// expandSuites resolves the trigger words to the suites they start, so the
// command knows which runs to follow, and names an unknown suite or label
// before anything is written.
func expandSuites(env *v1alpha1.DevEnvironment, words []string) ([]string, error) {
	var all []string
	for _, t := range env.Spec.Tests {
		all = append(all, t.Name)
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("devenvironment/%s has no test suites (spec.tests is empty)", env.Name)
	}
	var out []string
	add := func(n string) {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	for _, w := range words {
		switch {
		case w == "all":
			for _, n := range all {
				add(n)
			}
		case strings.HasPrefix(w, "label:"):
			label, found := strings.TrimPrefix(w, "label:"), false
			for _, t := range env.Spec.Tests {
				if slices.Contains(t.Labels, label) {
					add(t.Name)
					found = true
				}
			}
			if !found {
				return nil, fmt.Errorf("no suite of devenvironment/%s has the label %q", env.Name, label)
			}
		case strings.ContainsAny(w, "@,:"):
			return nil, fmt.Errorf("%q: give suite names, \"all\" or \"label:<label>\" (token triggers suite@token are for objects kept in Git; cancel with `kubectl devloop cancel`)", w)
		case slices.Contains(all, w):
			add(w)
		default:
			return nil, fmt.Errorf("devenvironment/%s has no test suite %q: its suites are %s", env.Name, w, strings.Join(all, ", "))
		}
	}
	return out, nil
}

// newRunsState finds, for each suite, the newest run numbered above what
// existed before the trigger, and says whether all have finished.
func newRunsState(env *v1alpha1.DevEnvironment, suites []string, after map[string]int64, value string) (map[string]*v1alpha1.TestRun, string, bool) {
	runs := map[string]*v1alpha1.TestRun{}
	var parts []string
	done := true
	for _, suite := range suites {
		r := newestRunAfter(env, suite, after[suite])
		if r == nil {
			done = false
			msg := suite + " not started"
			if t := env.Status.Test(suite); t != nil && t.Message != "" {
				msg += ": " + firstLine(t.Message)
			}
			parts = append(parts, msg)
			continue
		}
		runs[suite] = r.DeepCopy()
		if !finished(r) {
			done = false
		}
		parts = append(parts, runState(suite, r))
	}
	state := strings.Join(parts, "; ")
	if len(runs) == 0 && testrun.Unconsumed(env) != "" {
		state += " (trigger=" + value + " not consumed yet: is the operator running?)"
	}
	return runs, state, done
}

// runsOutcome prints the results and fails unless every run passed.
func runsOutcome(a *app, env string, suites []string, runs map[string]*v1alpha1.TestRun, p *progress) error {
	var bad []string
	for _, suite := range suites {
		r := runs[suite]
		if r.Result == v1alpha1.ResultPassed {
			continue
		}
		bad = append(bad, runState(suite, r))
		if r.LogTail != "" {
			fmt.Fprintf(a.out(), "--- %s #%d log tail (full log: kubectl devloop logs %s %s --run %d)\n%s\n", suite, r.Number, env, suite, r.Number, strings.TrimRight(r.LogTail, "\n"))
		}
	}
	if len(bad) > 0 {
		return failed("%s", strings.Join(bad, "; "))
	}
	fmt.Fprintf(a.out(), "all %d passed in %s\n", len(suites), seconds(p.elapsed()))
	return nil
}

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
	var envFlags []string
	cmd := &cobra.Command{
		Use:   "trigger ENV SUITE...",
		Short: "Run test suites, follow the runs, exit 0 only if all passed",
		Long: `Set the trigger annotation (trigger=<suites>) and follow the runs it starts
to their results. SUITE is a suite name, "all", or "label:<label>"; several
are joined into one comma list. A trigger still pending (not yet consumed by
the operator) is never overwritten: the command waits for it first.

The exit code is 0 when every run passed, 1 otherwise (Failed, TimedOut,
Cancelled, Error, or --timeout), so scripts and CI can use it.

--env NAME=value sets a variable for these runs over the suite's env; only
the names a suite lists in tests[].params are accepted.`,
		Example: `  kubectl devloop trigger volcano unit-tests
  kubectl devloop trigger volcano e2e --env E2E_FOCUS='Job' --env E2E_SKIP=Flaky
  kubectl devloop trigger volcano label:e2e --timeout 45m`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			name, targets := args[0], args[1:]
			s, env, err := a.connectTo(ctx, name)
			if err != nil {
				return err
			}
			suites, err := expandSuites(env, targets)
			if err != nil {
				return err
			}
			value, err := triggerValue(env, targets, envFlags)
			if err != nil {
				return err
			}
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
	cmd.Flags().StringArrayVar(&envFlags, "env", nil, "NAME=value for these runs (repeatable; only the suite's tests[].params)")
	return cmd
}

// triggerValue is the annotation value for the trigger words with the
// --env params on each, checked by the operator's own parser so a param a
// suite does not accept is refused before anything is written.
func triggerValue(env *v1alpha1.DevEnvironment, words, envFlags []string) (string, error) {
	params, err := testrun.ParseParamFlags(envFlags)
	if err != nil {
		return "", err
	}
	items := make([]string, len(words))
	for i, w := range words {
		items[i] = testrun.FormatSelector(w, params)
	}
	value := strings.Join(items, ",")
	tr, err := testrun.Parse(value)
	if err == nil {
		_, err = tr.Requests(env.Spec.Tests)
	}
	if err != nil {
		return "", fmt.Errorf("devenvironment/%s: %w", env.Name, err)
	}
	return value, nil
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
	// The runs with this trigger's params: another parameter set queued
	// meanwhile is someone else's run.
	params := map[string][]v1alpha1.EnvVar{}
	if tr, err := testrun.Parse(value); err == nil {
		reqs, _ := tr.Requests(env.Spec.Tests)
		for _, r := range reqs {
			params[r.Suite] = r.Params
		}
	}
	for _, suite := range suites {
		r := newestRunWith(env, suite, after[suite], params[suite])
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
		printResults(a.out(), suite, r)
		if r.Result == v1alpha1.ResultPassed {
			continue
		}
		bad = append(bad, runState(suite, r))
		if r.LogTail != "" {
			fmt.Fprintf(a.out(), "--- %s #%d log tail (full log: kubectl devloop logs %s %s --run %d)\n%s\n", suite, r.Number, env, suite, r.Number, printable(strings.TrimRight(r.LogTail, "\n")))
		}
	}
	if len(bad) > 0 {
		return failed("%s", strings.Join(bad, "; "))
	}
	fmt.Fprintf(a.out(), "all %d passed in %s\n", len(suites), seconds(p.elapsed()))
	return nil
}

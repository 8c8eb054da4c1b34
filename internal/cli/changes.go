package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/timeline"
)

func newChangesCommand(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "changes ENV",
		Short: "Show the environment's change timeline: each change from push to serving, and where its seconds went",
		Long: `Show the environment's change timeline, newest first: for each change (a new
source revision) its result (InFlight, Serving, Failed, Superseded), the time
from the push to serving, and how long each step took: Pack and Upload (measured
by kubectl devloop push), Fetch, Compile (a run step's builder), Assemble and
Push (per image), Deploy, LiveUpdate and Ready (per component). A step taken
by several images or components shows the span from the first start to the
last end. The operator keeps the last 10 changes in the ConfigMap
devloop-changes-ENV; -o json prints them as stored.`,
		Example: `  kubectl devloop changes volcano
  kubectl devloop changes volcano -o json | jq '.[0].steps'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "" && output != "json" {
				return fmt.Errorf("--output %q: want json (or nothing, for the table)", output)
			}
			s, env, err := a.connectTo(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			changes, err := readTimeline(cmd.Context(), s, env)
			if err != nil {
				return err
			}
			if output == "json" {
				data, err := json.MarshalIndent(changes, "", "  ")
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(a.out(), "%s\n", data)
				return err
			}
			if len(changes) == 0 {
				_, err = fmt.Fprintf(a.out(), "no changes recorded for devenvironment/%s yet: push one with kubectl devloop push\n", env.Name)
				return err
			}
			return renderChanges(a.out(), changes, time.Now())
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "json: the changes as the operator stores them")
	return cmd
}

// readTimeline reads env's change timeline (none when the operator wrote
// none), refusing a ConfigMap of its name that env does not control.
func readTimeline(ctx context.Context, s *session, env *v1alpha1.DevEnvironment) ([]timeline.Change, error) {
	name := timeline.ConfigMapName(env.Name)
	cm := &corev1.ConfigMap{}
	err := s.client.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: name}, cm)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading configmap %s/%s: %w", env.Namespace, name, err)
	case !metav1.IsControlledBy(cm, env):
		return nil, fmt.Errorf("configmap %s/%s is not devenvironment/%s's: the operator does not write its timeline there", env.Namespace, name, env.Name)
	}
	changes, err := timeline.Decode(cm)
	if err != nil {
		return nil, fmt.Errorf("configmap %s/%s: %w", env.Namespace, name, err)
	}
	return changes, nil
}

// stepColumns are the table's step columns, in the order a change takes
// them; only those some change has are shown.
var stepColumns = []timeline.StepName{timeline.Pack, timeline.Upload, timeline.Fetch, timeline.Compile, timeline.Assemble,
	timeline.Push, timeline.Deploy, timeline.Rollout, timeline.LiveUpdate, timeline.Ready}

// renderChanges prints changes (newest first) as a table, then the
// change-to-serving times of those that served.
func renderChanges(w io.Writer, changes []timeline.Change, now time.Time) error {
	var cols []timeline.StepName
	for _, name := range stepColumns {
		if slices.ContainsFunc(changes, func(c timeline.Change) bool {
			return slices.ContainsFunc(c.Steps, func(s timeline.Step) bool { return s.Name == name })
		}) {
			cols = append(cols, name)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := []string{"REVISION", "RESULT", "TO SERVING"}
	for _, c := range cols {
		header = append(header, strings.ToUpper(string(c)))
	}
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	var served []time.Duration
	for _, c := range changes {
		toServing := "-"
		switch {
		case c.Serving != nil:
			d := c.Serving.Sub(c.Started)
			served = append(served, d)
			toServing = seconds(d)
		case c.Result == timeline.InFlight:
			toServing = seconds(now.Sub(c.Started)) + "…"
		}
		row := []string{changeRevision(c), string(c.Result), toServing}
		for _, name := range cols {
			row = append(row, stepSpan(c, name, now))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, c := range changes {
		if c.Result == timeline.Failed && c.Message != "" {
			fmt.Fprintf(w, "%s failed: %s\n", changeRevision(c), firstLine(c.Message))
			break
		}
	}
	if len(served) > 0 {
		slices.Sort(served)
		_, err := fmt.Fprintf(w, "change to serving over %d changes: median %s, fastest %s, slowest %s\n",
			len(served), seconds(served[len(served)/2]), seconds(served[0]), seconds(served[len(served)-1]))
		return err
	}
	return nil
}

// changeRevision is a change's revision with digests shortened, cut to
// a column's width.
func changeRevision(c timeline.Change) string {
	var revs []string
	for _, r := range strings.Fields(c.Revision) {
		revs = append(revs, shortRevision(r))
	}
	s := strings.Join(revs, " ")
	if len(s) > 48 {
		s = s[:47] + "…"
	}
	return s
}

// stepSpan is how long a change's steps named name took, from the first
// start to the last end ("-" for none). A step of a change in flight
// still running (no duration yet, such as a Rollout waiting for the
// pods) runs until now, marked "…".
func stepSpan(c timeline.Change, name timeline.StepName, now time.Time) string {
	var start, end time.Time
	found, running := false, false
	for _, s := range c.Steps {
		if s.Name != name {
			continue
		}
		if !found || s.Start.Before(start) {
			start = s.Start
		}
		if e := s.Start.Add(s.Duration); !found || e.After(end) {
			end = e
		}
		running = running || (s.Duration == 0 && c.Result == timeline.InFlight)
		found = true
	}
	switch {
	case !found:
		return "-"
	case running && now.After(end):
		return duration(now.Sub(start)) + "…"
	case running:
		return duration(end.Sub(start)) + "…"
	}
	return duration(end.Sub(start))
}

// duration is d readably at a step's scale: milliseconds below a second.
func duration(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	return seconds(d)
}

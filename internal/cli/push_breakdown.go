package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/source"
	"github.com/devloop-dev/devloop/internal/timeline"
)

// clientSteps is what push measured of one change itself.
type clientSteps struct {
	pushed    timeline.Pushed  // its start, pack and upload
	stats     source.PushStats // what the upload sent
	requested time.Time        // when the reconcile request was written
}

// breakdownRow is one line of where a change's time went: the step, when
// it ended (from the push's start), and how long it took itself.
type breakdownRow struct {
	name string
	end  time.Duration
	took time.Duration
	note string
}

// operatorSteps name what the operator's timeline records (internal/
// timeline), as the breakdown prints them.
var operatorSteps = []struct {
	step timeline.StepName
	name string
}{
	{timeline.Fetch, "fetched"},
	{timeline.Compile, "compiled"},
	{timeline.Assemble, "assembled"},
	{timeline.Push, "image pushed"},
	{timeline.Deploy, "deployed"},
	{timeline.Rollout, "rolled out"},
	{timeline.LiveUpdate, "synced and restarted"},
	{timeline.Ready, "ready"},
}

// breakdown is where change c's time went, in the order the steps ended:
// the client's pack, upload and reconcile request, the wait for the
// operator to notice (to its first step), each step the operator recorded
// (steps of several components or images spanning the first start to the
// last end), and serving. Each row's share is the time since the row
// before it, so the shares sum to the change's time to serving; steps that
// overlap (a live update synced while the image is pushed) show a share
// smaller than what they took.
func breakdown(c timeline.Change, cs clientSteps) []breakdownRow {
	start := cs.pushed.At
	since := func(t time.Time) time.Duration { return max(0, t.Sub(start)) }
	uploaded := cs.pushed.Pack + cs.pushed.Upload
	rows := []breakdownRow{
		{name: "pack", end: cs.pushed.Pack, took: cs.pushed.Pack},
		{name: "upload", end: uploaded, took: cs.pushed.Upload, note: cs.stats.String()},
		{name: "reconcile requested", end: max(uploaded, since(cs.requested)), took: max(0, since(cs.requested)-uploaded)},
	}
	var first time.Time
	for _, s := range c.Steps {
		if s.Name != timeline.Pack && s.Name != timeline.Upload && (first.IsZero() || s.Start.Before(first)) {
			first = s.Start
		}
	}
	if !first.IsZero() {
		requested := rows[2].end
		rows = append(rows, breakdownRow{name: "operator noticed", end: max(requested, since(first)), took: max(0, since(first)-requested)})
	}
	for _, o := range operatorSteps {
		var from, to time.Time
		for _, s := range c.Steps {
			if s.Name != o.step {
				continue
			}
			if from.IsZero() || s.Start.Before(from) {
				from = s.Start
			}
			if e := s.Start.Add(s.Duration); e.After(to) {
				to = e
			}
		}
		if !from.IsZero() {
			rows = append(rows, breakdownRow{name: o.name, end: since(to), took: to.Sub(from)})
		}
	}
	if c.Serving != nil {
		rows = append(rows, breakdownRow{name: "serving", end: since(*c.Serving)})
	}
	slices.SortStableFunc(rows, func(a, b breakdownRow) int { return int(a.end - b.end) })
	return rows
}

// renderBreakdown prints rows as a table: step, at (since the push
// started), its share (since the row before), what it took itself.
func renderBreakdown(w io.Writer, rows []breakdownRow) error {
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintf(w, "where the %s went:\n", stepTime(rows[len(rows)-1].end))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  STEP\tAT\tSHARE\tTOOK\t")
	var prev time.Duration
	for _, r := range rows {
		took := "-"
		if r.took > 0 || r.name == "pack" || r.name == "upload" {
			took = stepTime(r.took)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", r.name, stepTime(r.end), stepTime(r.end-prev), took, r.note)
		prev = r.end
	}
	return tw.Flush()
}

// stepTime is d to the millisecond, the precision the shares add up at.
func stepTime(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	return fmt.Sprintf("%.3fs", d.Seconds())
}

// breakdownWait bounds the wait for the operator to write the timeline of
// a change it served (it writes it at the end of the reconcile that found
// it serving, a moment after the status push follows).
const breakdownWait = 5 * time.Second

// printBreakdown prints where the time of the change cs pushed went, read
// from the environment's change timeline; a line saying where to look
// later when the operator has not written it yet.
func (a *app) printBreakdown(ctx context.Context, s *session, env *v1alpha1.DevEnvironment, cs clientSteps) {
	deadline := time.Now().Add(breakdownWait)
	for {
		changes, err := readTimeline(ctx, s, env)
		if ctx.Err() != nil {
			return // the watch stopped, or a newer change is followed
		}
		if err != nil {
			fmt.Fprintf(a.out(), "no breakdown: %s\n", printable(err.Error()))
			return
		}
		if i := slices.IndexFunc(changes, func(c timeline.Change) bool {
			return c.Serving != nil && slices.Contains(strings.Split(c.Source, ","), cs.pushed.Source) && strings.Contains(c.Revision, cs.pushed.Digest)
		}); i >= 0 {
			renderBreakdown(a.out(), breakdown(changes[i], cs))
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			fmt.Fprintf(a.out(), "no breakdown yet: the operator has not recorded this change as serving (kubectl devloop changes %s shows it later)\n", env.Name)
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(a.opts.PollInterval):
		}
	}
}

//go:build e2e

package e2e

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// stepFigure is one row of the plugin's breakdown of a change ("where
// the … went", internal/cli/push_breakdown.go): when the step ended,
// since the push started, and what it took itself.
type stepFigure struct {
	at, took time.Duration
}

// breakdownRow matches a row: the step's name, AT, SHARE, TOOK ("-" when
// the step has no span of its own).
var breakdownRow = regexp.MustCompile(`^\s+(\S.*?)\s+(\d+ms|\d+\.\d+s)\s+(\d+ms|\d+\.\d+s)\s+(\d+ms|\d+\.\d+s|-)`)

// parseBreakdown reads the rows of the breakdown in a push's lines.
func parseBreakdown(lines []string) map[string]stepFigure {
	out := map[string]stepFigure{}
	in := false
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "where the "):
			in = true
			continue
		case !in:
			continue
		}
		m := breakdownRow.FindStringSubmatch(l)
		if m == nil || m[1] == "STEP" {
			continue
		}
		at, _ := time.ParseDuration(m[2])
		took, _ := time.ParseDuration(m[4])
		out[m[1]] = stepFigure{at: at, took: took}
	}
	return out
}

// breakdownTable is the median of each step over the arm's changes, in
// the order of their median end: where a change's time went, from the
// plugin's own breakdowns (the operator's change timeline).
func (a *devloopArm) breakdownTable() string {
	ats, tooks := map[string][]time.Duration{}, map[string][]time.Duration{}
	for _, steps := range a.steps {
		for name, f := range steps {
			ats[name] = append(ats[name], f.at)
			tooks[name] = append(tooks[name], f.took)
		}
	}
	if len(ats) == 0 {
		return "no breakdown in the plugin's lines\n"
	}
	names := make([]string, 0, len(ats))
	for n := range ats {
		names = append(names, n)
	}
	slices.SortFunc(names, func(x, y string) int { return int(median(ats[x]) - median(ats[y])) })
	var b strings.Builder
	fmt.Fprintf(&b, "where a devloop push's time went (the plugin's breakdown, median over %d changes; at: since the push started, after the local build):\n", len(a.steps))
	b.WriteString("| step | at | took | changes |\n|---|---|---|---|\n")
	for _, n := range names {
		fmt.Fprintf(&b, "| %s | %s | %s | %d |\n", n, median(ats[n]).Round(time.Millisecond), median(tooks[n]).Round(time.Millisecond), len(ats[n]))
	}
	return b.String()
}

package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/devloop-dev/devloop/internal/testregistry"
	"github.com/devloop-dev/devloop/internal/timeline"
)

// parsedRow is one row of the breakdown push printed.
type parsedRow struct {
	name      string
	at, share time.Duration
	note      string
}

// parseStepTime reads stepTime's output.
func parseStepTime(t *testing.T, s string) time.Duration {
	t.Helper()
	if ms, ok := strings.CutSuffix(s, "ms"); ok {
		n, err := strconv.Atoi(ms)
		if err != nil {
			t.Fatalf("bad time %q", s)
		}
		return time.Duration(n) * time.Millisecond
	}
	f, err := strconv.ParseFloat(strings.TrimSuffix(s, "s"), 64)
	if err != nil {
		t.Fatalf("bad time %q", s)
	}
	return time.Duration(f * float64(time.Second))
}

// parseBreakdown reads the rows under "where the … went:" in out.
func parseBreakdown(t *testing.T, out string) []parsedRow {
	t.Helper()
	_, table, ok := strings.Cut(out, "where the ")
	if !ok {
		t.Fatalf("no breakdown printed:\n%s", out)
	}
	lines := strings.Split(table, "\n")
	if len(lines) < 2 || strings.Join(strings.Fields(lines[1]), " ") != "STEP AT SHARE TOOK" {
		t.Fatalf("breakdown header %q:\n%s", lines[1], out)
	}
	cols := regexp.MustCompile(`\s{2,}`)
	var rows []parsedRow
	for _, l := range lines[2:] {
		if !strings.HasPrefix(l, "  ") {
			break
		}
		f := cols.Split(strings.TrimSpace(l), -1)
		if len(f) < 4 {
			t.Fatalf("breakdown row %q", l)
		}
		r := parsedRow{name: f[0], at: parseStepTime(t, f[1]), share: parseStepTime(t, f[2])}
		if len(f) > 4 {
			r.note = f[4]
		}
		rows = append(rows, r)
	}
	return rows
}

// push prints where a change's time went, read from what the operator
// recorded: against the real registry and the operator running under the
// chart's RBAC, the second push's breakdown names the client's steps,
// the wait for the operator and the operator's steps in the order they
// ended, its shares add up to the change's time to serving, and that time
// is the one the operator's timeline holds for the pushed digest.
func TestPushPrintsWhereTheTimeWent(t *testing.T) {
	host := testregistry.Start(t)
	ns := operatorNamespace(t)
	name := uniqueName("breakdown")
	createEnv(t, ns, name, pushedSpec(host, name+"-src"))
	dir := appTreeFor(t, "<h1>v1</h1>", name)
	if r := plugin(t, "push", dir, "--env", name, "--source", "app", "-n", ns); r.code != 0 {
		t.Fatalf("first push:\n%s", r)
	}
	if err := os.WriteFile(filepath.Join(dir, "site", "index.html"), []byte("<h1>v2</h1>"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := plugin(t, "push", dir, "--env", name, "--source", "app", "-n", ns)
	if r.code != 0 {
		t.Fatalf("second push:\n%s", r)
	}
	t.Logf("second push:\n%s", r.out)
	rows := parseBreakdown(t, r.out)

	var names []string
	for _, row := range rows {
		names = append(names, row.name)
	}
	if !slices.Equal(names[:3], []string{"pack", "upload", "reconcile requested"}) || names[len(names)-1] != "serving" {
		t.Errorf("steps %v: want pack, upload, reconcile requested first and serving last", names)
	}
	for _, want := range []string{"operator noticed", "fetched", "assembled", "image pushed"} {
		if !slices.Contains(names, want) {
			t.Errorf("steps %v lack %q", names, want)
		}
	}
	if i, j := slices.Index(names, "operator noticed"), slices.Index(names, "fetched"); i > j {
		t.Errorf("steps %v: the operator noticed after it fetched", names)
	}
	if !strings.Contains(rows[1].note, " sent, ") {
		t.Errorf("the upload row says nothing of the bytes sent: %q", rows[1].note)
	}
	var sum, prev time.Duration
	for _, row := range rows {
		if row.at < prev {
			t.Errorf("%s at %s, before the row above it (%s): not in the order steps ended", row.name, row.at, prev)
		}
		prev = row.at
		sum += row.share
	}
	total := rows[len(rows)-1].at
	// Each figure is printed to the millisecond.
	if slack := time.Duration(len(rows)+1) * time.Millisecond; sum < total-slack || sum > total+slack {
		t.Errorf("the shares sum to %s, the change took %s", sum, total)
	}

	// The total is the operator's: its timeline's time to serving of the
	// pushed digest.
	j := plugin(t, "changes", name, "-n", ns, "-o", "json")
	var changes []timeline.Change
	if err := json.Unmarshal([]byte(j.out), &changes); err != nil || len(changes) == 0 {
		t.Fatalf("changes -o json: %v\n%s", err, j)
	}
	c := changes[0]
	_, digest, _ := strings.Cut(strings.Fields(strings.SplitN(r.out, "\n", 2)[0])[1], "@")
	if c.Serving == nil || !strings.Contains(c.Revision, digest) {
		t.Fatalf("the newest change %+v is not the pushed %s serving", c, digest)
	}
	if d := c.Serving.Sub(c.Started); d-total > 2*time.Millisecond || total-d > 2*time.Millisecond {
		t.Errorf("the breakdown's total %s, the timeline's change to serving %s", total, d)
	}
}

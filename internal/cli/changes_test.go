package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/devloop-dev/devloop/internal/testregistry"
	"github.com/devloop-dev/devloop/internal/timeline"
)

func TestChangesTable(t *testing.T) {
	t0 := time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)
	served := t0.Add(4200 * time.Millisecond)
	step := func(name timeline.StepName, component string, from, took time.Duration) timeline.Step {
		return timeline.Step{Name: name, Component: component, Start: t0.Add(from), Duration: took}
	}
	changes := []timeline.Change{
		{Source: "app", Revision: "dev@sha256:" + strings.Repeat("b", 64), Started: t0.Add(time.Minute), Result: timeline.InFlight,
			Steps: []timeline.Step{
				step(timeline.Fetch, "", time.Minute, 20*time.Millisecond),
				step(timeline.Deploy, "web", time.Minute+100*time.Millisecond, 400*time.Millisecond),
				// Running: the pods are rolling out.
				step(timeline.Rollout, "web", time.Minute+500*time.Millisecond, 0),
			}},
		{Source: "app", Revision: "dev@sha256:" + strings.Repeat("a", 64), Started: t0, Serving: &served, Result: timeline.Serving,
			Steps: []timeline.Step{
				step(timeline.Pack, "", 0, 300*time.Millisecond),
				step(timeline.Upload, "", 300*time.Millisecond, 700*time.Millisecond),
				step(timeline.Fetch, "", 1100*time.Millisecond, 50*time.Millisecond),
				// Two images: the span from the first start to the last end.
				step(timeline.Assemble, "web/web", 1200*time.Millisecond, 100*time.Millisecond),
				step(timeline.Assemble, "web/sidecar", 1250*time.Millisecond, 250*time.Millisecond),
				step(timeline.Deploy, "web", 1600*time.Millisecond, 1500*time.Millisecond),
				step(timeline.Rollout, "web", 3100*time.Millisecond, 900*time.Millisecond),
				step(timeline.Ready, "web", 4000*time.Millisecond, 200*time.Millisecond),
			}},
		{Source: "app", Revision: "dev@sha256:" + strings.Repeat("c", 64), Started: t0.Add(-time.Hour), Result: timeline.Failed,
			Message: "component web: build failed: exit code 2\nmore"},
	}
	var out bytes.Buffer
	if err := renderChanges(&out, changes, t0.Add(time.Minute+3*time.Second)); err != nil {
		t.Fatal(err)
	}
	want := `REVISION                 RESULT    TO SERVING  PACK   UPLOAD  FETCH  ASSEMBLE  DEPLOY  ROLLOUT  READY
dev@sha256:bbbbbbbbbbbb  InFlight  3.0s…       -      -       20ms   -         400ms   2.5s…    -
dev@sha256:aaaaaaaaaaaa  Serving   4.2s        300ms  700ms   50ms   300ms     1.5s    900ms    200ms
dev@sha256:cccccccccccc  Failed    -           -      -       -      -         -       -        -
dev@sha256:cccccccccccc failed: component web: build failed: exit code 2
change to serving over 1 changes: median 4.2s, fastest 4.2s, slowest 4.2s
`
	if out.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", out.String(), want)
	}
}

// Two pushes through the plugin, reconciled by the operator: `changes`
// shows both, with what push measured and what the operator did.
func TestChangesShowsEachPush(t *testing.T) {
	host := testregistry.Start(t)
	ns := operatorNamespace(t)
	name := uniqueName("changes")
	createEnv(t, ns, name, pushedSpec(host, name+"-src"))
	dir := appTreeFor(t, "<h1>v1</h1>", name)
	for i, page := range []string{"<h1>v1</h1>", "<h1>v2</h1>"} {
		if err := os.WriteFile(filepath.Join(dir, "site", "index.html"), []byte(page), 0o644); err != nil {
			t.Fatal(err)
		}
		if r := plugin(t, "push", dir, "--env", name, "--source", "app", "-n", ns); r.code != 0 {
			t.Fatalf("push %d:\n%s", i+1, r)
		}
	}
	var r result
	waitUntil(t, "both changes serving in the timeline", func() bool {
		r = plugin(t, "changes", name, "-n", ns)
		return r.code == 0 && strings.Count(r.out, " Serving ") == 2
	})
	t.Logf("kubectl devloop changes:\n%s", r.out)
	header, _, _ := strings.Cut(r.out, "\n")
	if strings.Join(strings.Fields(header), " ") != "REVISION RESULT TO SERVING PACK UPLOAD FETCH ASSEMBLE PUSH DEPLOY READY" {
		t.Fatalf("header %q", header)
	}
	if !strings.Contains(r.out, "change to serving over 2 changes") {
		t.Fatalf("no change-to-serving summary:\n%s", r.out)
	}
}

package ui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/builder"
)

// The graph carries declared edges, the implicit ones internal/plan
// finds (an image a run template reads), the sources each component
// reads, phases from status and what a Blocked node waits for.
func TestGraphHasDeclaredImplicitAndSourceEdges(t *testing.T) {
	env := builder.Env("dev", "team").In("registry.test").Under("team").HTTPS().Registry().AppSource().
		Components(
			builder.Component("tools", builder.Images(builder.Image("tools", builder.Layer("bin", "/bin")))),
			builder.Component("crds", builder.Manifests("crd")),
			builder.Component("web", builder.DependsOn("crds"), builder.Images(builder.Image("web", builder.Run(
				&v1alpha1.BuildRun{Image: "golang:1.25", Command: []string{"make", `TOOLS={{ (image "tools").Reference }}`}})))),
		).
		Suites(builder.ImageSuite("unit", "golang", "go", "test").After("web")).Obj()
	env.Status.Components = []v1alpha1.ComponentStatus{{Name: "crds", Phase: v1alpha1.PhaseReady}, {Name: "web", Phase: v1alpha1.PhaseBlocked, WaitingFor: []string{"tools"}}}
	g := graphOf(env)
	if g.Error != "" {
		t.Fatalf("plan error: %s", g.Error)
	}
	var edges []string
	for _, e := range g.Edges {
		edges = append(edges, fmt.Sprintf("%s->%s:%v", e.From, e.To, e.Implicit))
	}
	all := strings.Join(edges, " ")
	for _, want := range []string{"component/web->component/crds:false", "component/web->component/tools:true", "component/crds->source/app:false", "test/unit->component/web:false"} {
		if !strings.Contains(all, want) {
			t.Errorf("edges %s: want %s", all, want)
		}
	}
	levels := map[string]int{}
	for _, n := range g.Nodes {
		levels[n.ID] = n.Level
		if n.ID == "component/web" && (n.Phase != "Blocked" || len(n.WaitingFor) != 1) {
			t.Errorf("web: %+v, want Blocked waiting for tools", n)
		}
	}
	if !(levels["source/app"] < levels["component/crds"] && levels["component/crds"] < levels["component/web"] && levels["component/web"] < levels["test/unit"]) {
		t.Errorf("levels %v: want each node right of what it depends on", levels)
	}
}

func TestStateReadsKstatusConditions(t *testing.T) {
	env := &v1alpha1.DevEnvironment{}
	if s, _ := stateOf(env); s != "Unknown" {
		t.Errorf("no conditions: %s, want Unknown", s)
	}
	env.Status.Conditions = []metav1.Condition{
		{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Message: "x"},
		{Type: v1alpha1.ConditionStalled, Status: metav1.ConditionTrue, Message: "spec.components[0].helm: bad"},
	}
	if s, m := stateOf(env); s != "Stalled" || m != "spec.components[0].helm: bad" {
		t.Errorf("stalled: %s %q", s, m)
	}
}

// However fast a log comes, the ring holds LogRingSize lines and counts
// what it dropped.
func TestLogRingIsBounded(t *testing.T) {
	r := newLogRing(4)
	for i := range 10 {
		r.push(LogLine{Text: fmt.Sprint(i), Time: time.Now()})
	}
	r.push(LogLine{Text: strings.Repeat("x", maxLogLine+10)})
	lines, dropped := r.take()
	if len(lines) != 4 || dropped != 7 {
		t.Fatalf("%d lines, %d dropped; want 4 and 7", len(lines), dropped)
	}
	if lines[0].Text != "7" || len(lines[3].Text) > maxLogLine+len("… (cut)") {
		t.Fatalf("kept %q … and a last line of %d bytes: want the newest, cut", lines[0].Text, len(lines[3].Text))
	}
	if lines, dropped := r.take(); len(lines) != 0 || dropped != 0 {
		t.Fatalf("second take: %d lines, %d dropped", len(lines), dropped)
	}
}

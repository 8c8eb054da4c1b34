package ui

import (
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/plan"
)

// EnvView is what the pages show of one environment: a summary for the
// list, the graph for the detail page, and the object itself (without
// managedFields) for the per-component panels. Every string is data: the
// page sets it with textContent, never as HTML.
type EnvView struct {
	Key       string            `json:"key"`
	Namespace string            `json:"namespace"`
	Name      string            `json:"name"`
	Labels    map[string]string `json:"labels,omitempty"`
	// State is Ready, Reconciling, Stalled or Unknown (kstatus).
	State           string     `json:"state"`
	Message         string     `json:"message,omitempty"`
	ComponentsReady string     `json:"componentsReady,omitempty"`
	LastPush        *PushView  `json:"lastPush,omitempty"`
	LastTest        string     `json:"lastTest,omitempty"`
	LastActivity    *time.Time `json:"lastActivity,omitempty"`
	Graph           Graph      `json:"graph"`
	Object          any        `json:"object"`
}

// PushView is the newest source revision the operator took.
type PushView struct {
	Source   string    `json:"source"`
	Revision string    `json:"revision"`
	When     time.Time `json:"when"`
}

// Graph is the environment's DAG: sources, components and test suites,
// with the declared and the implicit edges (from depends on to).
type Graph struct {
	Nodes []Node `json:"nodes"`
	Edges []Edge `json:"edges"`
	// Error is the plan's error when the spec does not make a DAG.
	Error string `json:"error,omitempty"`
}

// Node is one node of the graph; Level is its column (0: sources).
type Node struct {
	ID         string   `json:"id"`
	Kind       string   `json:"kind"` // source, component, test
	Name       string   `json:"name"`
	Phase      string   `json:"phase,omitempty"`
	Level      int      `json:"level"`
	WaitingFor []string `json:"waitingFor,omitempty"`
}

// Edge says From depends on To; Implicit when dependsOn does not list it.
type Edge struct {
	From     string `json:"from"`
	To       string `json:"to"`
	Implicit bool   `json:"implicit,omitempty"`
}

// NewEnvView summarizes env as the pages show it.
func NewEnvView(env *v1alpha1.DevEnvironment, now time.Time) *EnvView {
	obj := env.DeepCopy()
	obj.ManagedFields = nil
	delete(obj.Annotations, "kubectl.kubernetes.io/last-applied-configuration")
	v := &EnvView{
		Key:             env.Namespace + "/" + env.Name,
		Namespace:       env.Namespace,
		Name:            env.Name,
		Labels:          env.Labels,
		ComponentsReady: env.Status.ComponentsReady,
		LastTest:        env.Status.LastTestResult,
		Graph:           graphOf(env),
		Object:          obj,
	}
	v.State, v.Message = stateOf(env)
	v.LastPush = lastPush(env)
	v.LastActivity = lastActivity(env)
	return v
}

// stateOf reads the kstatus conditions: Stalled wins, then Reconciling,
// then Ready; an environment the operator has not seen is Unknown.
func stateOf(env *v1alpha1.DevEnvironment) (string, string) {
	conds := env.Status.Conditions
	if c := meta.FindStatusCondition(conds, v1alpha1.ConditionStalled); c != nil && c.Status == "True" {
		return "Stalled", c.Message
	}
	if c := meta.FindStatusCondition(conds, v1alpha1.ConditionReconciling); c != nil && c.Status == "True" {
		return "Reconciling", c.Message
	}
	if c := meta.FindStatusCondition(conds, v1alpha1.ConditionReady); c != nil {
		if c.Status == "True" {
			return "Ready", c.Message
		}
		return "NotReady", c.Message
	}
	return "Unknown", "not reconciled yet"
}

// lastPush is the newest source revision the operator took: it stamps
// lastResolveTime when a reference resolves to new content (a push to an
// OCI source, a new commit) and lastFetchTime when a fetch brings content
// of another digest; an OCI source's content is never fetched for a new
// digest (the reference named it), so lastFetchTime alone misses pushes.
// The page prefers the timeline's newest change when it has one.
func lastPush(env *v1alpha1.DevEnvironment) *PushView {
	var p *PushView
	for _, s := range env.Status.Sources {
		for _, t := range []*metav1.Time{s.LastFetchTime, s.LastResolveTime} {
			if t != nil && (p == nil || t.After(p.When)) {
				p = &PushView{Source: s.Name, Revision: s.Revision, When: t.Time}
			}
		}
	}
	return p
}

// lastActivity is the newest time anything happened to the environment:
// a fetch, a build, a test run, a condition change. The page shows the
// time since as "idle".
func lastActivity(env *v1alpha1.DevEnvironment) *time.Time {
	var t time.Time
	see := func(ts *time.Time) {
		if ts != nil && ts.After(t) {
			t = *ts
		}
	}
	for _, s := range env.Status.Sources {
		if s.LastFetchTime != nil {
			see(&s.LastFetchTime.Time)
		}
		if s.LastResolveTime != nil {
			see(&s.LastResolveTime.Time)
		}
	}
	for _, c := range env.Status.Components {
		for _, im := range c.Images {
			if b := im.Build; b != nil {
				if b.StartTime != nil {
					see(&b.StartTime.Time)
				}
				if b.CompletionTime != nil {
					see(&b.CompletionTime.Time)
				}
			}
		}
	}
	for _, ts := range env.Status.Tests {
		for _, r := range ts.Runs {
			if r.StartTime != nil {
				see(&r.StartTime.Time)
			}
			if r.CompletionTime != nil {
				see(&r.CompletionTime.Time)
			}
		}
	}
	for _, c := range env.Status.Conditions {
		see(&c.LastTransitionTime.Time)
	}
	if t.IsZero() {
		return nil
	}
	return &t
}

// graphOf builds the graph with internal/plan, the same checks and
// implicit edges the operator uses; a spec that does not plan still shows
// its nodes and declared edges, with the plan's error.
func graphOf(env *v1alpha1.DevEnvironment) Graph {
	g := Graph{Nodes: []Node{}, Edges: []Edge{}}
	implicit := map[string][]string{}
	if p, err := plan.Build(&env.Spec); err != nil {
		g.Error = bounded(err.Error(), 512)
	} else {
		implicit = p.Implicit
	}
	for _, s := range env.Spec.Sources {
		g.Nodes = append(g.Nodes, Node{ID: "source/" + s.Name, Kind: "source", Name: s.Name, Phase: sourcePhase(env, s.Name)})
	}
	for _, c := range env.Spec.Components {
		n := Node{ID: "component/" + c.Name, Kind: "component", Name: c.Name, Phase: "Pending"}
		if st := env.Status.Component(c.Name); st != nil {
			if st.Phase != "" {
				n.Phase = string(st.Phase)
			}
			n.WaitingFor = st.WaitingFor
		}
		g.Nodes = append(g.Nodes, n)
		for _, d := range c.DependsOn {
			g.Edges = append(g.Edges, Edge{From: n.ID, To: "component/" + d})
		}
		for _, d := range implicit[c.Name] {
			g.Edges = append(g.Edges, Edge{From: n.ID, To: "component/" + d, Implicit: true})
		}
		// The sources it reads: its images', its manifests', its chart's.
		var srcs []string
		add := func(s string) {
			if s != "" && !slices.Contains(srcs, s) {
				srcs = append(srcs, s)
			}
		}
		for _, im := range c.Images {
			add(im.Source)
		}
		if src, _, ok := c.DeploySource(); ok {
			add(src)
		}
		for _, s := range srcs {
			g.Edges = append(g.Edges, Edge{From: n.ID, To: "source/" + s})
		}
	}
	for _, t := range env.Spec.Tests {
		n := Node{ID: "test/" + t.Name, Kind: "test", Name: t.Name, Phase: "Idle"}
		if st := env.Status.Test(t.Name); st != nil {
			if r := st.Latest(); r != nil && r.Result != "" {
				n.Phase = string(r.Result)
			}
		}
		g.Nodes = append(g.Nodes, n)
		for _, d := range t.DependsOn {
			to := "component/" + d
			if env.Spec.Component(d) == nil {
				to = "test/" + d
			}
			g.Edges = append(g.Edges, Edge{From: n.ID, To: to})
		}
		if t.Source != "" {
			g.Edges = append(g.Edges, Edge{From: n.ID, To: "source/" + t.Source})
		}
	}
	levels(&g)
	return g
}

func sourcePhase(env *v1alpha1.DevEnvironment, name string) string {
	if s := env.Status.Source(name); s != nil && s.Revision != "" {
		return "Ready"
	}
	return "Pending"
}

// levels puts each node one column right of the deepest node it depends
// on; a cycle (a spec that does not plan) stops at the node count.
func levels(g *Graph) {
	index := map[string]int{}
	for i, n := range g.Nodes {
		index[n.ID] = i
	}
	for range g.Nodes {
		changed := false
		for _, e := range g.Edges {
			from, ok1 := index[e.From]
			to, ok2 := index[e.To]
			if ok1 && ok2 && g.Nodes[from].Level < g.Nodes[to].Level+1 {
				g.Nodes[from].Level = g.Nodes[to].Level + 1
				changed = true
			}
		}
		if !changed {
			return
		}
	}
}

package dag

import (
	"errors"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
)

type node struct {
	name string
	deps []string
}

func build(t testing.TB, nodes ...node) *Graph {
	t.Helper()
	g := New()
	for _, n := range nodes {
		if err := g.Add(n.name, n.deps...); err != nil {
			t.Fatalf("add %s: %v", n.name, err)
		}
	}
	return g
}

func TestOrder(t *testing.T) {
	cases := []struct {
		name  string
		nodes []node
		want  []string
	}{
		{"empty", nil, []string{}},
		{"declaration order when free", []node{{"b", nil}, {"a", nil}, {"c", nil}}, []string{"b", "a", "c"}},
		{"dependencies first", []node{{"op", []string{"crds", "ns"}}, {"crds", nil}, {"ns", nil}},
			[]string{"crds", "ns", "op"}},
		{"volcano", []node{
			{"webhook", []string{"admission-init"}},
			{"scheduler", []string{"namespaces"}},
			{"admission-init", []string{"crds"}},
			{"crds", []string{"namespaces"}},
			{"namespaces", nil},
		}, []string{"namespaces", "scheduler", "crds", "admission-init", "webhook"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := build(t, tc.nodes...).Order()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

func TestCyclePath(t *testing.T) {
	cases := []struct {
		name  string
		nodes []node
		want  []string
	}{
		{"self", []node{{"a", []string{"a"}}}, []string{"a", "a"}},
		{"two", []node{{"a", []string{"b"}}, {"b", []string{"a"}}}, []string{"a", "b", "a"}},
		{"three behind a tail", []node{
			{"tail", []string{"x"}}, {"x", []string{"y"}}, {"y", []string{"z"}}, {"z", []string{"x"}},
		}, []string{"x", "y", "z", "x"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := build(t, tc.nodes...).Order()
			var cycle *CycleError
			g.Expect(errors.As(err, &cycle)).To(BeTrue(), "error: %v", err)
			g.Expect(cycle.Path).To(Equal(tc.want))
			g.Expect(err.Error()).To(ContainSubstring(tc.want[0] + " -> "))
		})
	}
}

func TestValidateErrors(t *testing.T) {
	g := NewWithT(t)

	graph := build(t, node{"a", []string{"missing"}})
	var unknown *UnknownError
	g.Expect(errors.As(graph.Validate(), &unknown)).To(BeTrue())
	g.Expect(unknown.Dependency).To(Equal("missing"))

	var dup *DuplicateError
	g.Expect(errors.As(graph.Add("a"), &dup)).To(BeTrue())
}

func TestLevelsAndReverse(t *testing.T) {
	g := NewWithT(t)
	graph := build(t, node{"app", []string{"db", "crds"}}, node{"db", nil}, node{"crds", nil}, node{"tests", []string{"app"}})

	levels, err := graph.Levels()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(levels).To(Equal([][]string{{"db", "crds"}, {"app"}, {"tests"}}))

	rev, err := graph.ReverseOrder()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rev).To(Equal([]string{"tests", "app", "crds", "db"}))
	g.Expect(graph.Dependents("app")).To(Equal([]string{"tests"}))
}

func TestWaitingFor(t *testing.T) {
	g := NewWithT(t)
	graph := build(t, node{"app", []string{"db", "crds"}}, node{"db", nil}, node{"crds", nil})
	ready := map[string]bool{"crds": true}
	g.Expect(graph.WaitingFor("app", func(n string) bool { return ready[n] })).To(Equal([]string{"db"}))
	ready["db"] = true
	g.Expect(graph.WaitingFor("app", func(n string) bool { return ready[n] })).To(BeEmpty())
}

// FuzzGraph builds graphs from arbitrary bytes: no panic, and whenever Order
// succeeds every node comes after its dependencies; whenever it reports a
// cycle, the path really is one.
func FuzzGraph(f *testing.F) {
	f.Add([]byte{3, 0, 1, 1, 2, 2, 0})
	f.Add([]byte{5, 1, 0, 2, 1, 3, 2, 4, 3})
	f.Add([]byte{1, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		n := int(data[0]%24) + 1
		names := make([]string, n)
		for i := range names {
			names[i] = string(rune('a' + i))
		}
		deps := map[string][]string{}
		for i := 1; i+1 < len(data); i += 2 {
			from, to := names[int(data[i])%n], names[int(data[i+1])%(n+2)%n]
			if data[i+1]%7 == 6 {
				to = "ghost" // a dangling reference now and then
			}
			if !slices.Contains(deps[from], to) {
				deps[from] = append(deps[from], to)
			}
		}
		graph := New()
		for _, name := range names {
			if err := graph.Add(name, deps[name]...); err != nil {
				t.Fatal(err)
			}
		}
		order, err := graph.Order()
		var cycle *CycleError
		var unknown *UnknownError
		switch {
		case err == nil:
			pos := map[string]int{}
			for i, name := range order {
				pos[name] = i
			}
			if len(order) != n {
				t.Fatalf("order has %d nodes, want %d", len(order), n)
			}
			for from, ds := range deps {
				for _, d := range ds {
					if pos[d] >= pos[from] {
						t.Fatalf("%s placed before its dependency %s: %v", from, d, order)
					}
				}
			}
		case errors.As(err, &cycle):
			p := cycle.Path
			if len(p) < 2 || p[0] != p[len(p)-1] {
				t.Fatalf("not a cycle: %v", p)
			}
			for i := 0; i+1 < len(p); i++ {
				if !slices.Contains(deps[p[i]], p[i+1]) {
					t.Fatalf("%s does not depend on %s in path %v", p[i], p[i+1], p)
				}
			}
		case errors.As(err, &unknown):
			if unknown.Dependency != "ghost" {
				t.Fatalf("unexpected unknown dependency %v", unknown)
			}
		default:
			t.Fatalf("unexpected error %v", err)
		}
	})
}

func TestAncestorsAreEverythingANodeDependsOnTransitively(t *testing.T) {
	g := New()
	for _, n := range [][]string{{"db"}, {"cache"}, {"api", "db", "cache"}, {"web", "api"}, {"e2e", "web", "db"}, {"lonely"}} {
		if err := g.Add(n[0], n[1:]...); err != nil {
			t.Fatal(err)
		}
	}
	got := g.Ancestors("e2e")
	slices.Sort(got)
	if want := []string{"api", "cache", "db", "web"}; !slices.Equal(got, want) {
		t.Errorf("Ancestors(e2e) = %v, want %v", got, want)
	}
	if got := g.Ancestors("lonely"); len(got) != 0 {
		t.Errorf("Ancestors(lonely) = %v, want none", got)
	}
}

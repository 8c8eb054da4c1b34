// Package dag orders named nodes by their dependencies: topological order,
// cycle detection that returns the cycle's path, and readiness gating.
//
// Orders are deterministic: among nodes that could go next, the one declared
// first goes first, so status and logs read the same on every reconcile.
package dag

import (
	"fmt"
	"slices"
	"strings"
)

// Graph is a set of named nodes and the nodes each depends on.
type Graph struct {
	order []string            // declaration order
	deps  map[string][]string // node -> what it depends on, as declared
}

// New returns an empty graph.
func New() *Graph {
	return &Graph{deps: map[string][]string{}}
}

// DuplicateError says a node was added twice.
type DuplicateError struct{ Node string }

func (e *DuplicateError) Error() string { return fmt.Sprintf("%q is declared more than once", e.Node) }

// UnknownError says a node depends on a node the graph does not have.
type UnknownError struct{ Node, Dependency string }

func (e *UnknownError) Error() string {
	return fmt.Sprintf("%q depends on %q, which does not exist", e.Node, e.Dependency)
}

// CycleError is a dependency cycle; Path starts and ends with the same node.
type CycleError struct{ Path []string }

func (e *CycleError) Error() string {
	return "dependency cycle: " + strings.Join(e.Path, " -> ")
}

// Add declares a node and what it depends on. Dependencies may be declared
// later; Validate checks they all exist.
func (g *Graph) Add(node string, dependsOn ...string) error {
	if _, ok := g.deps[node]; ok {
		return &DuplicateError{Node: node}
	}
	g.order = append(g.order, node)
	g.deps[node] = slices.Clone(dependsOn)
	return nil
}

// Nodes returns the nodes in declaration order.
func (g *Graph) Nodes() []string { return slices.Clone(g.order) }

// Has reports whether node is in the graph.
func (g *Graph) Has(node string) bool {
	_, ok := g.deps[node]
	return ok
}

// DependsOn returns what node depends on, as declared.
func (g *Graph) DependsOn(node string) []string { return slices.Clone(g.deps[node]) }

// Ancestors returns everything node depends on, directly or not.
func (g *Graph) Ancestors(node string) []string {
	var out []string
	next := []string{node}
	for len(next) > 0 {
		n := next[len(next)-1]
		next = next[:len(next)-1]
		for _, d := range g.deps[n] {
			if !slices.Contains(out, d) {
				out = append(out, d)
				next = append(next, d)
			}
		}
	}
	return out
}

// Dependents returns the nodes that depend on node directly, in declaration
// order.
func (g *Graph) Dependents(node string) []string {
	var out []string
	for _, n := range g.order {
		if slices.Contains(g.deps[n], node) {
			out = append(out, n)
		}
	}
	return out
}

// Validate returns an *UnknownError for the first dangling dependency, or a
// *CycleError for the first cycle, in declaration order; nil otherwise.
func (g *Graph) Validate() error {
	for _, n := range g.order {
		for _, d := range g.deps[n] {
			if !g.Has(d) {
				return &UnknownError{Node: n, Dependency: d}
			}
		}
	}
	if path := g.findCycle(); path != nil {
		return &CycleError{Path: path}
	}
	return nil
}

// findCycle runs a depth-first search and returns the first cycle found as a
// path a -> ... -> a, or nil.
func (g *Graph) findCycle() []string {
	const (
		unvisited = iota
		onStack
		done
	)
	state := make(map[string]int, len(g.order))
	var stack []string
	var visit func(n string) []string
	visit = func(n string) []string {
		state[n] = onStack
		stack = append(stack, n)
		for _, d := range g.deps[n] {
			if !g.Has(d) {
				continue
			}
			switch state[d] {
			case onStack:
				start := slices.Index(stack, d)
				return append(slices.Clone(stack[start:]), d)
			case unvisited:
				if p := visit(d); p != nil {
					return p
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[n] = done
		return nil
	}
	for _, n := range g.order {
		if state[n] == unvisited {
			if p := visit(n); p != nil {
				return p
			}
		}
	}
	return nil
}

// Order returns every node after all it depends on. Among nodes that are
// free to go, declaration order decides. It fails like Validate.
func (g *Graph) Order() ([]string, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	placed := make(map[string]bool, len(g.order))
	out := make([]string, 0, len(g.order))
	for len(out) < len(g.order) {
		for _, n := range g.order {
			if placed[n] || !g.allIn(g.deps[n], placed) {
				continue
			}
			placed[n] = true
			out = append(out, n)
			break
		}
	}
	return out, nil
}

// Levels groups nodes by depth: level 0 depends on nothing, level k only on
// nodes of lower levels. Nodes of one level may proceed in parallel.
func (g *Graph) Levels() ([][]string, error) {
	order, err := g.Order()
	if err != nil {
		return nil, err
	}
	depth := make(map[string]int, len(order))
	var levels [][]string
	for _, n := range order {
		d := 0
		for _, dep := range g.deps[n] {
			d = max(d, depth[dep]+1)
		}
		depth[n] = d
		if d == len(levels) {
			levels = append(levels, nil)
		}
		levels[d] = append(levels[d], n)
	}
	return levels, nil
}

// ReverseOrder is Order backwards: dependents before what they depend on,
// the order to tear an environment down in.
func (g *Graph) ReverseOrder() ([]string, error) {
	order, err := g.Order()
	if err != nil {
		return nil, err
	}
	slices.Reverse(order)
	return order, nil
}

// WaitingFor returns the direct dependencies of node that ready does not
// accept, in declared order: what node is blocked on. Empty means node may
// proceed.
func (g *Graph) WaitingFor(node string, ready func(string) bool) []string {
	var out []string
	for _, d := range g.deps[node] {
		if !ready(d) {
			out = append(out, d)
		}
	}
	return out
}

func (g *Graph) allIn(names []string, set map[string]bool) bool {
	for _, n := range names {
		if !set[n] {
			return false
		}
	}
	return true
}

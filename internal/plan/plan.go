// Package plan turns a DevEnvironment spec into the dependency graph the
// reconciler walks, and checks what the CRD's CEL rules cannot: cycles,
// tag templates that render to valid tags, run step templates, image
// references and release names as the libraries that will use them parse
// them. A component also depends on what it reads without listing it in
// dependsOn: images its run steps' templates name, and run step outputs it
// uses as sources (edges.go).
package plan

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/dag"
)

// Plan is the checked shape of an environment.
type Plan struct {
	// Graph holds components and tests; tests depend on components and on
	// other tests.
	Graph *dag.Graph
	// Order is every component and test after all it depends on.
	Order []string
	// Components and Tests index the spec by name.
	Components map[string]*v1alpha1.Component
	Tests      map[string]*v1alpha1.TestSuite
	// Implicit are, per component, the components it depends on in Graph
	// without listing them in dependsOn: those building the images its run
	// templates read or the outputs it uses as sources.
	Implicit map[string][]string
}

// CycleError is a dependency cycle, with the path and the field it is in.
type CycleError struct {
	Path  []string
	Field *field.Path
}

func (e *CycleError) Error() string {
	return fmt.Sprintf("%s: %v", e.Field, &dag.CycleError{Path: e.Path})
}

// InvalidError lists what is wrong with the spec, each naming its field.
type InvalidError struct{ Errs field.ErrorList }

func (e *InvalidError) Error() string { return e.Errs.ToAggregate().Error() }

// Build checks spec and returns its plan, a *CycleError, or an
// *InvalidError.
func Build(spec *v1alpha1.DevEnvironmentSpec) (*Plan, error) {
	root := field.NewPath("spec")
	p := &Plan{
		Graph:      dag.New(),
		Components: make(map[string]*v1alpha1.Component, len(spec.Components)),
		Tests:      make(map[string]*v1alpha1.TestSuite, len(spec.Tests)),
		Implicit:   map[string][]string{},
	}
	errs := checkReferences(spec, root)
	implicit, edgeErrs := implicitEdges(spec, root)
	errs = append(errs, edgeErrs...)
	for i := range spec.Components {
		c := &spec.Components[i]
		p.Components[c.Name] = c
		deps := withImplicit(c.DependsOn, implicit[c.Name])
		if extra := deps[len(c.DependsOn):]; len(extra) > 0 {
			p.Implicit[c.Name] = extra
		}
		if err := p.Graph.Add(c.Name, deps...); err != nil {
			errs = append(errs, field.Duplicate(root.Child("components").Index(i).Child("name"), c.Name))
		}
	}
	for i := range spec.Tests {
		t := &spec.Tests[i]
		p.Tests[t.Name] = t
		if err := p.Graph.Add(t.Name, t.DependsOn...); err != nil {
			errs = append(errs, field.Duplicate(root.Child("tests").Index(i).Child("name"), t.Name))
		}
	}
	errs = append(errs, checkImages(spec, root)...)
	errs = append(errs, checkHelm(spec, root)...)
	errs = append(errs, checkValuesSize(spec, root)...)
	if len(errs) > 0 {
		return nil, &InvalidError{Errs: errs}
	}

	order, err := p.Graph.Order()
	var cycle *dag.CycleError
	switch {
	case errors.As(err, &cycle):
		fp := root.Child("components")
		if _, isTest := p.Tests[cycle.Path[0]]; isTest {
			fp = root.Child("tests")
		} else if f := cycleField(cycle.Path, p.Components, implicit); f != nil {
			// A template or an output source closes the cycle: name it.
			fp = f
		}
		return nil, &CycleError{Path: cycle.Path, Field: fp}
	case err != nil:
		// Dangling references are reported by checkReferences; this is a
		// guard against the two disagreeing.
		return nil, &InvalidError{Errs: field.ErrorList{field.Invalid(root, "", err.Error())}}
	}
	p.Order = order
	return p, nil
}

// ComponentOrder is Order without the tests.
func (p *Plan) ComponentOrder() []string {
	var out []string
	for _, n := range p.Order {
		if _, ok := p.Components[n]; ok {
			out = append(out, n)
		}
	}
	return out
}

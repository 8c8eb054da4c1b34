package plan

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// edge is a dependency a component has without naming it in dependsOn,
// and the first field that makes it.
type edge struct {
	to    string
	field *field.Path
}

// implicitEdges are, per component, the components it depends on through
// what it reads: the images its run steps' templates name
// ({{ (image "operator").Digest }}), and the run step outputs it uses as
// a source (spec.sources[].output). Each is a dependency as if listed in
// dependsOn: the component waits until that one is Ready. It also checks
// the templates and output sources, naming the field of each problem.
func implicitEdges(spec *v1alpha1.DevEnvironmentSpec, root *field.Path) (map[string][]edge, field.ErrorList) {
	builders := imageBuilders(spec)
	outputs, errs := checkOutputSources(spec, root, builders)
	edges := map[string][]edge{}
	add := func(from int, to int, fp *field.Path) {
		name, dep := spec.Components[from].Name, spec.Components[to].Name
		if !slices.ContainsFunc(edges[name], func(e edge) bool { return e.to == dep }) {
			edges[name] = append(edges[name], edge{to: dep, field: fp})
		}
	}
	// useSource adds the edge of a source that is a run step's output.
	useSource := func(i int, src string, fp *field.Path) {
		b, ok := outputs[src]
		switch {
		case !ok:
		case b == i:
			errs = append(errs, field.Invalid(fp, src, fmt.Sprintf(
				"source %q is an output of this component's own build (image %s): use it from a component after this one", src, spec.Source(src).Output.Image)))
		default:
			add(i, b, fp)
		}
	}
	for i := range spec.Components {
		c := &spec.Components[i]
		cp := root.Child("components").Index(i)
		for j := range c.Images {
			img := &c.Images[j]
			ip := cp.Child("images").Index(j)
			if img.Source != "" {
				useSource(i, img.Source, ip.Child("source"))
			}
			if img.Run == nil {
				continue
			}
			example := exampleRunValues(c.Name, img.Name, img.Source)
			for _, f := range runTemplates(img.Run) {
				fp := f.path(ip.Child("run"))
				names, err := TemplateImages(f.text)
				if err == nil {
					err = checkRunTemplate(f.text, example)
				}
				if err != nil {
					errs = append(errs, field.Invalid(fp, f.text, err.Error()))
					continue
				}
				for _, n := range names {
					b, ok := builders[n]
					switch {
					case !ok:
						errs = append(errs, field.Invalid(fp, f.text, fmt.Sprintf("image %q is not built by any component", n)))
					case b == i:
						errs = append(errs, field.Invalid(fp, f.text, fmt.Sprintf(
							"image %q is not built by a component before this one: component %s builds it itself", n, c.Name)))
					default:
						add(i, b, fp)
					}
				}
			}
		}
		if src, at, ok := c.DeploySource(); ok {
			useSource(i, src, cp.Child(at[0], at[1:]...))
		}
	}
	return edges, errs
}

// imageBuilders maps each image to the index of the component building
// it (the first, when a duplicate is reported elsewhere).
func imageBuilders(spec *v1alpha1.DevEnvironmentSpec) map[string]int {
	out := map[string]int{}
	for i, c := range spec.Components {
		for _, img := range c.Images {
			if _, ok := out[img.Name]; !ok {
				out[img.Name] = i
			}
		}
	}
	return out
}

// checkOutputSources checks that each output source names an output a
// run step declares, and maps the source to the index of the component
// building it.
func checkOutputSources(spec *v1alpha1.DevEnvironmentSpec, root *field.Path, builders map[string]int) (map[string]int, field.ErrorList) {
	var errs field.ErrorList
	out := map[string]int{}
	for i, s := range spec.Sources {
		if s.Output == nil {
			continue
		}
		fp := root.Child("sources").Index(i).Child("output")
		value := s.Output.Image + " " + s.Output.Name
		b, ok := builders[s.Output.Image]
		if !ok {
			errs = append(errs, field.Invalid(fp, value, fmt.Sprintf("image %q is not built by any component", s.Output.Image)))
			continue
		}
		img := imageOf(&spec.Components[b], s.Output.Image)
		if img.Run == nil {
			errs = append(errs, field.Invalid(fp, value, fmt.Sprintf("image %q has no run step to produce output %q", img.Name, s.Output.Name)))
			continue
		}
		var names []string
		for _, o := range img.Run.Outputs {
			names = append(names, o.Name)
		}
		if !slices.Contains(names, s.Output.Name) {
			have := "it declares none"
			if len(names) > 0 {
				have = "it declares " + strings.Join(names, ", ")
			}
			errs = append(errs, field.Invalid(fp, value, fmt.Sprintf("image %q's run step has no output %q in run.outputs (%s)", img.Name, s.Output.Name, have)))
			continue
		}
		out[s.Name] = b
	}
	return out, errs
}

func imageOf(c *v1alpha1.Component, name string) *v1alpha1.ImageSpec {
	for i := range c.Images {
		if c.Images[i].Name == name {
			return &c.Images[i]
		}
	}
	return nil
}

// withImplicit is dependsOn followed by the implicit edges it does not
// already list.
func withImplicit(dependsOn []string, implicit []edge) []string {
	out := slices.Clone(dependsOn)
	for _, e := range implicit {
		if !slices.Contains(out, e.to) {
			out = append(out, e.to)
		}
	}
	return out
}

// cycleField is the field of the first implicit edge on a cycle's path
// (a -> b -> a) that dependsOn does not also declare, so the error points
// at the template or source that closes it; nil when every edge is
// declared.
func cycleField(path []string, components map[string]*v1alpha1.Component, implicit map[string][]edge) *field.Path {
	for k := 0; k+1 < len(path); k++ {
		from, to := path[k], path[k+1]
		c, ok := components[from]
		if !ok || slices.Contains(c.DependsOn, to) {
			continue
		}
		for _, e := range implicit[from] {
			if e.to == to {
				return e.field
			}
		}
	}
	return nil
}

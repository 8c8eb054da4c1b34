package plan

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// checkReferences repeats the CRD's reference rules in Go. The API server
// enforces them on write; the operator checks again because an object may
// predate a CRD upgrade, and so that a bad reference can never reach the
// engines as a nil lookup.
func checkReferences(spec *v1alpha1.DevEnvironmentSpec, root *field.Path) field.ErrorList {
	var errs field.ErrorList
	sources := map[string]bool{}
	for _, s := range spec.Sources {
		sources[s.Name] = true
	}
	components := map[string]bool{}
	images := map[string]string{} // image -> component
	for _, c := range spec.Components {
		components[c.Name] = true
	}
	for i, c := range spec.Components {
		fp := root.Child("components").Index(i)
		for j, d := range c.DependsOn {
			if !components[d] {
				errs = append(errs, field.NotFound(fp.Child("dependsOn").Index(j), d))
			}
		}
		for j, img := range c.Images {
			ip := fp.Child("images").Index(j)
			if other, dup := images[img.Name]; dup {
				errs = append(errs, field.Duplicate(ip.Child("name"), img.Name+" (also built by "+other+")"))
			}
			images[img.Name] = c.Name
			if img.Source != "" && !sources[img.Source] {
				errs = append(errs, field.NotFound(ip.Child("source"), img.Source))
			}
		}
		if src, at, ok := c.DeploySource(); ok && !sources[src] {
			errs = append(errs, field.NotFound(fp.Child(at[0], at[1:]...), src))
		}
	}
	for i, c := range spec.Components {
		for j, v := range c.ImageValues() {
			if _, ok := images[v.Image]; !ok {
				errs = append(errs, field.NotFound(root.Child("components").Index(i).Child("helm", "imageValues").Index(j).Child("image"), v.Image))
			}
		}
	}
	tests := map[string]bool{}
	for _, t := range spec.Tests {
		tests[t.Name] = true
	}
	for i, t := range spec.Tests {
		fp := root.Child("tests").Index(i)
		if components[t.Name] {
			errs = append(errs, field.Duplicate(fp.Child("name"), t.Name+" (also a component)"))
		}
		for j, d := range t.DependsOn {
			if !components[d] && !tests[d] {
				errs = append(errs, field.NotFound(fp.Child("dependsOn").Index(j), d))
			}
		}
		if t.Source != "" && !sources[t.Source] {
			errs = append(errs, field.NotFound(fp.Child("source"), t.Source))
		}
		if t.Image.Built != "" {
			if _, ok := images[t.Image.Built]; !ok {
				errs = append(errs, field.NotFound(fp.Child("image", "built"), t.Image.Built))
			}
		}
	}
	return errs
}

package cli

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// selectByLabel keeps, in v, the components and test suites whose labels
// (components[].labels, tests[].labels) hold label. Nothing selected is
// an error naming the labels in use, so a typo does not print an empty
// tree.
func selectByLabel(v *StatusView, env *v1alpha1.DevEnvironment, label string) error {
	components := v.Components[:0]
	for _, c := range v.Components {
		if spec := specComponent(env, c.Name); spec != nil && slices.Contains(spec.Labels, label) {
			components = append(components, c)
		}
	}
	tests := v.Tests[:0]
	for _, t := range v.Tests {
		if slices.Contains(t.Labels, label) {
			tests = append(tests, t)
		}
	}
	if len(components) == 0 && len(tests) == 0 {
		return fmt.Errorf("-l %s: no component or test suite of devenvironment/%s has that label; labels in use: %s", label, env.Name, labelsInUse(env))
	}
	v.Components, v.Tests = components, tests
	return nil
}

// labelsInUse lists the labels of env's components and suites, or "none".
func labelsInUse(env *v1alpha1.DevEnvironment) string {
	var all []string
	for _, c := range env.Spec.Components {
		all = append(all, c.Labels...)
	}
	for _, t := range env.Spec.Tests {
		all = append(all, t.Labels...)
	}
	if len(all) == 0 {
		return "none"
	}
	sort.Strings(all)
	return strings.Join(slices.Compact(all), ", ")
}

// withLabel keeps the names of components with label; all of them
// without one.
func withLabel(env *v1alpha1.DevEnvironment, names []string, label string) []string {
	if label == "" {
		return names
	}
	var out []string
	for _, n := range names {
		if c := specComponent(env, n); c != nil && slices.Contains(c.Labels, label) {
			out = append(out, n)
		}
	}
	return out
}

// checkLabel refuses a label no component of the environment has, before
// anything is pushed.
func checkLabel(ctx context.Context, s *session, name, label string) error {
	if label == "" {
		return nil
	}
	env, err := s.getEnv(ctx, name)
	if err != nil {
		return err
	}
	for _, c := range env.Spec.Components {
		if slices.Contains(c.Labels, label) {
			return nil
		}
	}
	return fmt.Errorf("-l %s: no component of devenvironment/%s has that label; labels in use: %s", label, name, labelsInUse(env))
}

package controllers

import "github.com/devloop-dev/devloop/api/v1alpha1"

// componentSources are the sources a component reads itself: its images'
// and its chart's or manifests'. An image another component built (a run
// template, an output source) is a dependency in the DAG, not a source
// here: its component waits for that one.
func componentSources(c *v1alpha1.Component) []string {
	var names []string
	for _, img := range c.Images {
		if img.Source != "" {
			names = append(names, img.Source)
		}
	}
	if src, _, ok := c.DeploySource(); ok {
		names = append(names, src)
	}
	return names
}

// sourcesOfComponentsOn are the sources the components that are on read.
// A source only a component that is off (on demand and not brought up,
// or turned off) or a test suite reads holds the environment's Ready up
// for nothing: it is waited for once something that reads it runs.
func (s *scope) sourcesOfComponentsOn() []string {
	var names []string
	for name, c := range s.plan.Components {
		if s.offReason(name) == "" {
			names = append(names, componentSources(c)...)
		}
	}
	return names
}

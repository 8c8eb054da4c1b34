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

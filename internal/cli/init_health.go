package cli

import (
	"regexp"
	"sort"
	"strings"
)

// A chart's custom resources and the health wait: a component's Ready
// waits for every object it deploys, a custom resource included, and an
// operator's policy object that cannot turn ready on the user's cluster
// (GPU Operator's ClusterPolicy on a node without a GPU driver) holds the
// environment forever. Init cannot know which will; it names them and the
// field that stops waiting for one.

// maxHealthIgnores is health.ignore's limit.
const maxHealthIgnores = 4

var apiVersionLine = regexp.MustCompile(`(?m)^apiVersion:\s*(\S+)`)

// customResource is a kind and API group a chart's template renders.
type customResource struct{ Kind, Group string }

// customResources are the custom resources the chart's own templates
// render, sorted by kind: a kind Kubernetes does not define, in an API
// group that is not Kubernetes' own (a templated apiVersion leaves the
// group out).
func (c *helmChart) customResources() []customResource {
	seen := map[customResource]bool{}
	for _, t := range c.templates {
		for _, doc := range strings.Split(t, "\n---") {
			k := kindLine.FindStringSubmatch(doc)
			if k == nil || podKinds[k[1]] || builtinKinds[k[1]] {
				continue
			}
			cr := customResource{Kind: k[1]}
			if v := apiVersionLine.FindStringSubmatch(doc); v != nil && !strings.Contains(v[1], "{{") {
				group, _, versioned := strings.Cut(v[1], "/")
				if !versioned || kubernetesGroup(group) {
					continue
				}
				cr.Group = group
			}
			seen[cr] = true
		}
	}
	var out []customResource
	for cr := range seen {
		out = append(out, cr)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Kind+out[i].Group < out[j].Kind+out[j].Group })
	return out
}

// kubernetesGroup says whether group is one of Kubernetes' own API groups.
func kubernetesGroup(group string) bool {
	switch group {
	case "apps", "batch", "policy", "autoscaling":
		return true
	}
	return strings.HasSuffix(group, ".k8s.io")
}

// noteCustomResourceHealth says which custom resources chart c renders
// and how to leave one out of the component's health wait (the first, as
// an example: which can never turn ready only the user knows).
func (d *draft) noteCustomResourceHealth(c *helmChart) {
	crs := c.customResources()
	if len(crs) == 0 {
		return
	}
	var kinds []string
	for _, cr := range crs {
		kinds = append(kinds, cr.Kind)
	}
	example := "kind: " + crs[0].Kind
	if crs[0].Group != "" {
		example += ", group: " + crs[0].Group
	}
	d.note("chart %s renders %s: Ready waits for the health of each; one that cannot turn ready on your cluster "+
		"(an operator's policy without the hardware it manages) holds the environment: leave it out of the wait "+
		"(at most %d), e.g. health: {ignore: [{%s}]}", c.Dir, strings.Join(kinds, ", "), maxHealthIgnores, example)
}

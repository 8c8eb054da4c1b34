package deploy

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/deploy/helm"
	"github.com/devloop-dev/devloop/internal/digest"
)

// helmRendering sets what req renders besides chart and values: c's
// patches, then the environment's labels and every built image pinned,
// over the release manifest and its hooks alike (helm/render.go says
// how); and skipCRDs.
func helmRendering(req *helm.ReleaseRequest, env *v1alpha1.DevEnvironment, c *v1alpha1.Component, images []BuiltImage, opts ApplyOptions) error {
	patches, err := CompilePatches(componentField(env, c)+".helm.patches", c.Helm.Patches, req.Namespace)
	if err != nil {
		return err
	}
	req.Patches = patches
	req.Mutate = func(objs []*unstructured.Unstructured) error {
		Label(objs, opts)
		_, err := RewriteImages(objs, images)
		return err
	}
	// The image mapping and the patches are part of what the release
	// renders: a new digest or patch upgrades the release even when chart
	// and values are unchanged. (Without patches the key is what it was
	// before they existed, so no release upgrades for nothing.)
	req.RenderKey = digest.JSON(renderKeyImages(env, c, images))
	if len(c.Helm.Patches) > 0 {
		req.RenderKey += "\x00" + digest.JSON(c.Helm.Patches)
	}
	req.SkipCRDs = c.Helm.SkipCRDs
	return nil
}

// renderKeyImages are the built images c's render key counts: its own,
// those of the components it depends on (dependsOn, at any depth) and
// those its imageValues name. An image of any other component is still
// pinned wherever the chart names it, but its new build does not upgrade
// the release: a test suite's image built on demand upgraded Dynamo's
// release, which rolled out the operator a live update had kept in place.
func renderKeyImages(env *v1alpha1.DevEnvironment, c *v1alpha1.Component, images []BuiltImage) []BuiltImage {
	byName := map[string]*v1alpha1.Component{}
	for i := range env.Spec.Components {
		byName[env.Spec.Components[i].Name] = &env.Spec.Components[i]
	}
	mine := map[string]bool{}
	for _, v := range c.ImageValues() {
		mine[v.Image] = true
	}
	seen := map[string]bool{}
	todo := []string{c.Name}
	for len(todo) > 0 {
		name := todo[0]
		todo = todo[1:]
		comp := byName[name]
		if comp == nil || seen[name] {
			continue
		}
		seen[name] = true
		for _, img := range comp.Images {
			mine[img.Name] = true
		}
		todo = append(todo, comp.DependsOn...)
	}
	var out []BuiltImage
	for _, img := range images {
		if mine[img.Name] {
			out = append(out, img)
		}
	}
	return out
}

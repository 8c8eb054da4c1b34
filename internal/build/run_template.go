package build

import (
	"fmt"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/internal/plan"
)

// renderRun returns img with its run step's command and env rendered for
// this build (plan.RenderRun, over the values tags render from), and the
// digest of each image the templates read. Both are part of the image's
// inputs: a new build of an image it reads rebuilds it, nothing else
// does. The spec is not changed; an image without a run step is returned
// as it is.
//
// The plan made the component depend on the components building the
// images it reads, so they are Ready, and pushed, when this runs.
func (s *imageBuilds) renderRun(img *v1alpha1.ImageSpec, tags *plan.TagTemplates) (*v1alpha1.ImageSpec, map[string]string, error) {
	if img.Run == nil {
		return img, nil, nil
	}
	names, err := plan.RunImages(img.Run)
	if err != nil {
		return nil, nil, fault.Stalledf(v1alpha1.ReasonInvalidSpec, "image %s: %w", img.Name, err)
	}
	var reads map[string]string
	for _, n := range names {
		ref, ok := builtImage(s.env, n)
		if !ok {
			// Not Stalled: the plan guarantees its builder is Ready, so
			// this is status catching up; the next reconcile sees it.
			return nil, nil, fmt.Errorf("image %s: its run step reads image %s, which has no pushed digest yet", img.Name, n)
		}
		if reads == nil {
			reads = map[string]string{}
		}
		reads[n] = ref.Digest
	}
	run, err := plan.RenderRun(img.Run, plan.RunValuesOf(tags.Values), func(name string) (plan.BuiltImage, error) {
		if ref, ok := builtImage(s.env, name); ok {
			return ref, nil
		}
		return plan.BuiltImage{}, fmt.Errorf("image %s has no pushed digest", name)
	})
	if err != nil {
		return nil, nil, fault.Stalledf(v1alpha1.ReasonInvalidSpec, "image %s: %w", img.Name, err)
	}
	out := *img
	out.Run = run
	if s.env.DebugsImage(img.Name) {
		// Debug mode (devloop.dev/debug): the inputs hash covers the
		// debug spec, so turning it on or off builds the image again.
		return DebugImageSpec(&out), reads, nil
	}
	return &out, reads, nil
}

// builtImage is an image of the environment as nodes pull it, the way
// imageValues write it: the repository under registry.pullPrefix when the
// spec sets one (env.PullRepository), its digest and content tag. ok is
// false while it has no pushed digest.
func builtImage(env *v1alpha1.DevEnvironment, name string) (plan.BuiltImage, bool) {
	_, ist := env.BuiltImage(name)
	if ist == nil || ist.Digest == "" || ist.Repository == "" {
		return plan.BuiltImage{}, false
	}
	repo := env.PullRepository(name, ist.Repository)
	return plan.BuiltImage{Reference: repo + "@" + ist.Digest, Repository: repo, Digest: ist.Digest, Tag: ist.ContentHash}, true
}

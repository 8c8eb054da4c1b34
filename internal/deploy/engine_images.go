package deploy

import (
	"slices"
	"strings"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// builtImages is every image of the environment that has a pushed digest:
// as the rewriter matches it (push repository, pull repository, bare name)
// and as imageValues write it. Deployed references use the pull repository
// (registry.pullPrefix when set), since nodes pull them.
func builtImages(env *v1alpha1.DevEnvironment) ([]BuiltImage, map[string]ImageRef) {
	var images []BuiltImage
	refs := map[string]ImageRef{}
	for i := range env.Spec.Components {
		c := &env.Spec.Components[i]
		for j := range c.Images {
			img := &c.Images[j]
			ist := env.Status.Component(c.Name).Image(img.Name)
			if ist == nil || ist.Digest == "" || ist.Repository == "" {
				continue
			}
			pull := env.PullRepository(img.Name, ist.Repository)
			repos := []string{ist.Repository}
			for _, r := range []string{pull, img.Name} {
				if !slices.Contains(repos, r) {
					repos = append(repos, r)
				}
			}
			// DeployDigest: while a live update serves a newer digest in
			// place, the templates keep the one they run (no rollout).
			built := BuiltImage{Name: img.Name, Repositories: repos, Reference: pull + "@" + ist.DeployDigest()}
			if img.Run != nil && env.DebugsImage(img.Name) {
				// The component deploys once its images are built, so
				// its digest is the debug build's (delve at /dlv). A
				// chart of another component naming this image during
				// a rebuild may run the previous digest under delve
				// until the build lands.
				built.Debug = &DebugEntrypoint{Entrypoint: img.Entrypoint, Cmd: img.Cmd}
			} else if lu := img.LiveUpdate; lu != nil {
				// The build put the supervisor in the image: its
				// containers run under it, so syncs reach them.
				built.LiveUpdate = &LiveUpdateEntrypoint{Entrypoint: img.Entrypoint, Cmd: img.Cmd, After: lu.After, Command: lu.Command}
			}
			images = append(images, built)
			refs[img.Name] = ImageRef{Repository: pull, Digest: ist.DeployDigest(), Tag: ist.ContentHash, Revision: revisionTag(ist),
				Registry: pullRegistry(env), Name: img.Name}
		}
	}
	return images, refs
}

// revisionTag is the tag an image was pushed under from its source
// revision, as its build recorded it; empty when the spec has no such
// template or the tag is not among those pushed (the image is about to be
// rebuilt), so imageValues asking for it wait instead of writing a tag
// that does not exist.
func revisionTag(ist *v1alpha1.ImageStatus) string {
	if ist.RevisionTag != "" && slices.Contains(ist.Tags, ist.RevisionTag) {
		return ist.RevisionTag
	}
	return ""
}

// pullRegistry is the registry prefix nodes pull built images from:
// registry.pullPrefix when set, else registry.prefix (a built image's
// repository is that prefix and its name).
func pullRegistry(env *v1alpha1.DevEnvironment) string {
	r := env.Spec.Registry
	if r == nil {
		return ""
	}
	if r.PullPrefix != "" {
		return strings.TrimSuffix(r.PullPrefix, "/")
	}
	return strings.TrimSuffix(r.Prefix, "/")
}

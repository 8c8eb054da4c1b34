package controllers

import (
	"regexp"
	"slices"
	"strings"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/deploy"
	"github.com/devloop-dev/devloop/internal/plan"
	"github.com/devloop-dev/devloop/internal/source"
)

// revisionTemplate matches a tag template made from the source revision.
var revisionTemplate = regexp.MustCompile(`\{\{ ?\.(Revision|ShortRevision) ?\}\}`)

// builtImages is every image of the environment that has a pushed digest:
// as the rewriter matches it (push repository, pull repository, bare name)
// and as imageValues write it. Deployed references use the pull repository
// (registry.pullPrefix when set), since nodes pull them.
func builtImages(env *v1alpha1.DevEnvironment, in *ComponentInputs) ([]deploy.BuiltImage, map[string]deploy.ImageRef) {
	var images []deploy.BuiltImage
	refs := map[string]deploy.ImageRef{}
	for i := range env.Spec.Components {
		c := &env.Spec.Components[i]
		for j := range c.Images {
			img := &c.Images[j]
			ist := findImageStatus(env, c.Name, img.Name)
			if ist == nil || ist.Digest == "" || ist.Repository == "" {
				continue
			}
			pull := pullRepository(env, img.Name, ist.Repository)
			repos := []string{ist.Repository}
			for _, r := range []string{pull, img.Name} {
				if !slices.Contains(repos, r) {
					repos = append(repos, r)
				}
			}
			images = append(images, deploy.BuiltImage{Name: img.Name, Repositories: repos, Reference: pull + "@" + ist.Digest})
			ref := deploy.ImageRef{Repository: pull, Digest: ist.Digest, Tag: ist.ContentHash,
				Revision: revisionTag(c, img, ist, in)}
			if len(ist.Tags) > 0 {
				ref.Tag = ist.Tags[0] // the content tag comes first
			}
			refs[img.Name] = ref
		}
	}
	return images, refs
}

// pullRepository is how nodes name an image's repository.
func pullRepository(env *v1alpha1.DevEnvironment, image, pushed string) string {
	if r := env.Spec.Registry; r != nil && r.PullPrefix != "" {
		return strings.TrimSuffix(r.PullPrefix, "/") + "/" + image
	}
	return pushed
}

// revisionTag is the tag an image was pushed under from its source
// revision, as the build recorded it (ImageStatus.RevisionTag). Status
// from before that field is rendered again from the current revision.
// Empty when the spec has no such template or the tag was not pushed (the
// image is about to be rebuilt), so imageValues asking for it wait instead
// of writing a tag that does not exist.
func revisionTag(c *v1alpha1.Component, img *v1alpha1.ImageSpec, ist *v1alpha1.ImageStatus, in *ComponentInputs) string {
	if ist.RevisionTag != "" {
		if slices.Contains(ist.Tags, ist.RevisionTag) {
			return ist.RevisionTag
		}
		return ""
	}
	if in == nil || in.Source == nil || img.Source == "" {
		return ""
	}
	ref, ok := in.Source(img.Source)
	if !ok {
		return ""
	}
	tag := renderRevisionTag(c, img, ref, ist.ContentHash)
	if !slices.Contains(ist.Tags, tag) {
		return ""
	}
	return tag
}

// renderRevisionTag renders the first tag template of img that uses the
// source revision; empty when there is none.
func renderRevisionTag(c *v1alpha1.Component, img *v1alpha1.ImageSpec, ref source.Ref, contentHash string) string {
	for _, t := range img.Tags {
		if !revisionTemplate.MatchString(t) {
			continue
		}
		tag, err := plan.RenderTag(t, tagValues(img, c, ref, contentHash))
		if err != nil {
			return ""
		}
		return tag
	}
	return ""
}

func findImageStatus(env *v1alpha1.DevEnvironment, component, image string) *v1alpha1.ImageStatus {
	st := lastStatus(env, component)
	if st == nil {
		return nil
	}
	for i := range st.Images {
		if st.Images[i].Name == image {
			return &st.Images[i]
		}
	}
	return nil
}

package build

import (
	"context"
	"slices"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/internal/image"
)

// tagOwner is the environment whose status records, in one repository,
// the digest a tag names: who pushed it, as far as devloop knows.
type tagOwner struct {
	// env is the owner's namespace/name.
	env string
	// shared: the owner's image sets sharedRepository.
	shared bool
	// inputs are what the owner built that digest from: equal inputs are
	// the same content, whatever the digest.
	inputs string
}

// findTagOwner looks through the environments the operator watches for
// the one (other than this one) whose image in repository is digest; nil
// when none is (a tool pushed it, or its environment moved on or is gone).
func (s *imageBuilds) findTagOwner(ctx context.Context, repository, digest string) (*tagOwner, error) {
	if s.e.Cache == nil {
		return nil, nil
	}
	var list v1alpha1.DevEnvironmentList
	if err := s.e.Cache.List(ctx, &list); err != nil {
		return nil, err
	}
	for i := range list.Items {
		other := &list.Items[i]
		if other.UID == s.env.UID {
			continue
		}
		for _, cs := range other.Status.Components {
			for _, ist := range cs.Images {
				if ist.Repository != repository || ist.Digest != digest {
					continue
				}
				owner := &tagOwner{env: other.Namespace + "/" + other.Name, inputs: ist.Inputs}
				if c := other.Spec.Component(cs.Name); c != nil {
					i := slices.IndexFunc(c.Images, func(img v1alpha1.ImageSpec) bool { return img.Name == ist.Name })
					owner.shared = i >= 0 && c.Images[i].SharedRepository
				}
				return owner, nil
			}
		}
	}
	return nil, nil
}

// tagGuard is the rule of who moves a tag that names a digest this
// environment did not push (previous is the one it recorded last; inputs,
// what this build is of; field, the image's path in the spec):
//   - an image not opted in to sharing never moves it;
//   - an image opted in never moves one an environment not opted in
//     pushed: both must say the repository is shared;
//   - between images opted in, the tag is moved only when this
//     environment's content changed, and not when it names an image of
//     the same inputs: one push per content, whoever built it, and no
//     environment moves it back.
func (s *imageBuilds) tagGuard(ctx context.Context, img *v1alpha1.ImageSpec, field, previous, inputs string) image.TagGuard {
	return func(tag, from, to string) error {
		if from == previous {
			return nil
		}
		b, err := s.registry(ctx)
		if err != nil {
			return err
		}
		repository := b.Repository(img.Name)
		owner, err := s.findTagOwner(ctx, repository, from)
		if err != nil {
			return err
		}
		if owner != nil {
			if s.tagOwners == nil {
				s.tagOwners = map[string]string{}
			}
			s.tagOwners[from] = owner.env
		}
		if !img.SharedRepository || (owner != nil && !owner.shared) {
			return tagRefused(img.Name, field, tag, repository, from, owner, img.SharedRepository)
		}
		if to == previous || (owner != nil && owner.inputs == inputs) {
			return image.ErrLeaveTag
		}
		return nil
	}
}

// tagRefused is the Stalled error of a push that would take a tag: it
// names the repository, who pushed the tag, and the ways out.
func tagRefused(imageName, field, tag, repository, from string, owner *tagOwner, optedIn bool) error {
	by, way := "another environment or tool", "set "+field+".sharedRepository: true if it is shared on purpose"
	switch {
	case owner != nil && optedIn:
		by = "environment " + owner.env + ", which does not share it"
		way = "set sharedRepository: true on " + owner.env + "'s image too"
	case owner != nil:
		by = "environment " + owner.env
		way = "set sharedRepository: true on both images (" + field + ".sharedRepository here)"
	}
	return fault.Stalledf(v1alpha1.ReasonTagMoved,
		"image %s: tag %s in %s names %s, pushed by %s; not moved: set spec.registry.prefix to a repository of this environment's own, or %s",
		imageName, tag, repository, shortDigest(from), by, way)
}

// shortDigest is a digest cut to 12 hex digits, as container tools show
// it.
func shortDigest(d string) string {
	if len(d) > len("sha256:")+12 {
		return d[:len("sha256:")+12]
	}
	return d
}

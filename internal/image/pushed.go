package image

import (
	"context"
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// PushedImage reads an image this environment pushed, by digest, with the
// registry's credentials: for comparing two builds' files (live update).
// An image that is no index is read as it is, whatever platform says. Of
// an index, platform ("os/arch[/variant]") picks the image; with platform
// empty an index of one platform is read as that platform's image and an
// index of several is refused, since which one a pod runs depends on its
// node.
func (b *Builder) PushedImage(ctx context.Context, image, digest, platform string) (v1.Image, error) {
	repo, err := b.repository(image)
	if err != nil {
		return nil, err
	}
	desc, err := remote.Get(repo.Digest(digest), append(b.remoteOpts, remote.WithContext(ctx))...)
	if err != nil {
		return nil, fmt.Errorf("image %s: reading %s: %w", image, digest, err)
	}
	if !desc.MediaType.IsIndex() {
		return desc.Image()
	}
	idx, err := desc.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("image %s: reading index %s: %w", image, digest, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("image %s: reading index %s: %w", image, digest, err)
	}
	if platform == "" {
		if len(m.Manifests) != 1 {
			return nil, fmt.Errorf("image %s: %s is an index of %d platforms: a live update needs one (images[].platforms)", image, digest, len(m.Manifests))
		}
		return idx.Image(m.Manifests[0].Digest)
	}
	want, err := v1.ParsePlatform(platform)
	if err != nil {
		return nil, fmt.Errorf("image %s: platform %q: %w", image, platform, err)
	}
	for _, d := range m.Manifests {
		if d.Platform != nil && d.Platform.OS == want.OS && d.Platform.Architecture == want.Architecture &&
			(want.Variant == "" || d.Platform.Variant == want.Variant) {
			return idx.Image(d.Digest)
		}
	}
	return nil, fmt.Errorf("image %s: index %s has no image for %s", image, digest, platform)
}

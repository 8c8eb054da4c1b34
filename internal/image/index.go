package image

import (
	"context"
	"fmt"
	"sort"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/fault"
)

// defaultPlatform is built when an image names no platform.
var defaultPlatform = func() v1.Platform {
	p, err := v1.ParsePlatform(v1alpha1.DefaultPlatform)
	if err != nil {
		panic(err)
	}
	return *p
}()

// parsePlatforms parses "os/arch[/variant]" strings into platforms sorted
// by name without duplicates. The order is fixed so that the index digest
// (the content hash) does not depend on how the spec lists them, and so
// that an index published from builder Jobs (a map of platforms) equals the
// index an in-process build makes of the same images.
func parsePlatforms(image string, platforms []string) ([]v1.Platform, error) {
	if len(platforms) == 0 {
		return []v1.Platform{defaultPlatform}, nil
	}
	byName := map[string]v1.Platform{}
	for _, s := range platforms {
		p, err := v1.ParsePlatform(s)
		if err != nil || p.OS == "" || p.Architecture == "" {
			return nil, fault.Permanentf("image %s: platform %q is not os/arch[/variant]", image, s)
		}
		byName[p.String()] = *p
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]v1.Platform, len(names))
	for i, n := range names {
		out[i] = byName[n]
	}
	return out, nil
}

// platformImage is one platform's image of an index.
type platformImage struct {
	platform v1.Platform
	image    v1.Image
}

// newIndex makes the image index of images, in their order. It is a Docker
// manifest list when every image is a Docker manifest (a Docker base), an
// OCI index otherwise, so the index matches its children.
func newIndex(images []platformImage) (v1.ImageIndex, error) {
	indexType := types.DockerManifestList
	adds := make([]mutate.IndexAddendum, len(images))
	for i, pi := range images {
		mt, err := pi.image.MediaType()
		if err != nil {
			return nil, err
		}
		if mt != types.DockerManifestSchema2 {
			indexType = types.OCIImageIndex
		}
		p := pi.platform
		adds[i] = mutate.IndexAddendum{Add: pi.image, Descriptor: v1.Descriptor{Platform: &p}}
	}
	return mutate.IndexMediaType(mutate.AppendManifests(empty.Index, adds...), indexType), nil
}

// pushedIndex returns what Publish tags: the one pushed image, or an index
// of the pushed platform images (fetched by digest: manifests only).
func (b *Builder) pushedIndex(ctx context.Context, image string, repo name.Repository, platforms map[string]v1.Hash) (pushable, error) {
	if len(platforms) == 0 {
		return nil, fmt.Errorf("image %s: no platform image to publish", image)
	}
	digests := map[string]v1.Hash{}
	names := make([]string, 0, len(platforms))
	for s, d := range platforms {
		p, err := v1.ParsePlatform(s)
		if err != nil {
			return nil, fault.Permanentf("image %s: platform %q is not os/arch[/variant]", image, s)
		}
		digests[p.String()] = d
		names = append(names, s)
	}
	sorted, err := parsePlatforms(image, names)
	if err != nil {
		return nil, err
	}
	images := make([]platformImage, len(sorted))
	for i, p := range sorted {
		d := digests[p.String()]
		desc, err := b.puller.Get(ctx, repo.Digest(d.String()))
		if err != nil {
			return nil, pushError(err, repo.String())
		}
		if !desc.MediaType.IsImage() {
			return nil, fmt.Errorf("image %s: %s of platform %s is a %s, not an image", image, d, p.String(), desc.MediaType)
		}
		img, err := desc.Image()
		if err != nil {
			return nil, pushError(err, repo.String())
		}
		images[i] = platformImage{platform: p, image: img}
	}
	if len(images) == 1 {
		return images[0].image, nil
	}
	return newIndex(images)
}

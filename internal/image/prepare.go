package image

import (
	"context"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/devloop-dev/devloop/internal/timeline"
)

// Prepared is an image assembled here, its digest and tags known, not
// pushed yet: Build is Prepare then Push. Splitting them lets a caller
// use the image as assembled (a live update reads its changed files)
// while it is pushed; nothing may name Digest as pushed before Push
// returned without an error.
type Prepared struct {
	b     *Builder
	image string
	repo  name.Repository
	top   pushable
	tags  []string
	// Digest is the image's digest (of the index for several platforms),
	// which Push will push it as.
	Digest string
	// Image is the image as assembled (one platform; nil for an index):
	// its layers read from the source content in the directory it was
	// assembled from, for as long as that stays on disk.
	Image v1.Image
}

// Prepare assembles img from dir for every platform and computes its
// digest and tags, as Build does, without pushing.
func (b *Builder) Prepare(ctx context.Context, img Spec, dir string, render func(contentHash string) ([]string, error)) (*Prepared, error) {
	repo, err := b.repository(img.Name)
	if err != nil {
		return nil, err
	}
	assembling := time.Now()
	images, err := b.assemblePlatforms(ctx, img, img.Platforms, dir)
	if err != nil {
		return nil, err
	}
	var top pushable = images[0].image
	if len(images) > 1 {
		if top, err = newIndex(images); err != nil {
			return nil, err
		}
	}
	p, err := b.prepared(img.Name, repo, top, render)
	if err != nil {
		return nil, err
	}
	if len(images) == 1 {
		p.Image = images[0].image
	}
	// The change timeline's Assemble step (internal/timeline; nothing is
	// recorded without a change in ctx).
	timeline.Mark(ctx, timeline.Assemble, assembling)
	return p, nil
}

// prepared computes top's digest and renders its tags.
func (b *Builder) prepared(image string, repo name.Repository, top pushable, render func(string) ([]string, error)) (*Prepared, error) {
	digest, err := top.Digest()
	if err != nil {
		return nil, err
	}
	tags, err := b.tagsFor(image, repo, digest.Hex, render)
	if err != nil {
		return nil, err
	}
	return &Prepared{b: b, image: image, repo: repo, top: top, tags: tags, Digest: digest.String()}, nil
}

// Push pushes what the registry does not hold yet of the prepared image,
// then moves its tags (see publish), and says what it did. It may be
// called once.
func (p *Prepared) Push(ctx context.Context) (*Result, error) {
	// The timeline's Push step: work a layer defers until it is read
	// (compression) counts here.
	defer timeline.Mark(ctx, timeline.Push, time.Now())
	uploaded, pushed, moved, err := p.b.publish(ctx, p.repo, p.top, p.tags)
	if err != nil {
		return nil, err
	}
	d, err := v1.NewHash(p.Digest)
	if err != nil {
		return nil, err
	}
	return &Result{
		Repository:  p.b.Repository(p.image),
		Digest:      p.Digest,
		ContentHash: d.Hex,
		Tags:        p.tags,
		Uploaded:    uploaded,
		Pushed:      pushed,
		MovedFrom:   moved,
		Image:       p.Image,
	}, nil
}

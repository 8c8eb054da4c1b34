package image

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/devloop-dev/devloop/internal/fault"
)

// pushable is an image or an index: something pushed by digest with its
// dependencies, then tagged.
type pushable interface {
	remote.Taggable
	partial.Describable
}

// pushState is what the registry lacks of a build.
type pushState struct {
	// manifestMissing: the manifest (or index) is not in the repository.
	manifestMissing bool
	// tagsToMove are the tags that do not name the digest yet.
	tagsToMove []string
	// previous is the digest each tag to move named before, for those
	// that named one.
	previous map[string]string
}

// inRegistry asks the registry (HEAD requests only) whether repo holds
// digest and which of tags do not name it yet.
func (b *Builder) inRegistry(ctx context.Context, repo name.Repository, digest v1.Hash, tags []string) (pushState, error) {
	desc, err := b.puller.Head(ctx, repo.Digest(digest.String()))
	switch {
	case isNotFound(err):
		// Without the manifest no tag can name it: every tag moves.
	case err != nil:
		return pushState{}, pushError(err, repo.String())
	case desc.Digest != digest:
		return pushState{}, fmt.Errorf("push to %s: the registry answered %s for %s", repo, desc.Digest, digest)
	}
	state := pushState{manifestMissing: isNotFound(err), previous: map[string]string{}}
	for _, tag := range tags {
		// Where each tag points before it moves: a tag another
		// environment moved since this one last pushed is reported.
		desc, err := b.puller.Head(ctx, repo.Tag(tag))
		switch {
		case isNotFound(err):
			state.tagsToMove = append(state.tagsToMove, tag)
		case err != nil:
			return pushState{}, pushError(err, repo.String())
		case desc.Digest != digest:
			state.tagsToMove = append(state.tagsToMove, tag)
			if tag != digest.Hex {
				state.previous[tag] = desc.Digest.String()
			}
		}
	}
	return state, nil
}

// isNotFound reports a 404 (HEAD responses carry no error code).
func isNotFound(err error) bool {
	var terr *transport.Error
	return errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound
}

// publish pushes what the registry lacks of top and moves the tags to it:
// blobs, then the manifest (an index after its images) by digest, and only
// then the tags, so a push failing midway leaves every tag where it was.
// It returns the blobs uploaded and whether anything was written.
func (b *Builder) publish(ctx context.Context, repo name.Repository, top pushable, tags []string) (uploaded int, pushed bool, moved map[string]string, err error) {
	digest, err := top.Digest()
	if err != nil {
		return 0, false, nil, err
	}
	state, err := b.inRegistry(ctx, repo, digest, tags)
	if err != nil {
		return 0, false, nil, err
	}
	if err := checkTagMoves(ctx, &state, digest.String()); err != nil {
		return 0, false, nil, err
	}
	if !state.manifestMissing && len(state.tagsToMove) == 0 {
		return 0, false, nil, nil
	}

	pusher, err := b.newPusher()
	if err != nil {
		return 0, false, nil, err
	}
	ctx, count := withUploadCounter(ctx)
	if state.manifestMissing {
		if err := pusher.Push(ctx, repo.Digest(digest.String()), top); err != nil {
			return int(count.Load()), true, nil, pushError(err, repo.String())
		}
	}
	for _, tag := range state.tagsToMove {
		if err := pusher.Put(ctx, repo.Tag(tag), top); err != nil {
			return int(count.Load()), true, nil, pushError(err, repo.String())
		}
	}
	return int(count.Load()), true, state.previous, nil
}

// pushByDigest pushes image (blobs, then the manifest) by digest, without
// a tag. go-containerregistry skips it if the manifest is there already and
// skips every blob the registry has.
func (b *Builder) pushByDigest(ctx context.Context, repo name.Repository, image v1.Image) (v1.Hash, int, error) {
	digest, err := image.Digest()
	if err != nil {
		return v1.Hash{}, 0, err
	}
	pusher, err := b.newPusher()
	if err != nil {
		return v1.Hash{}, 0, err
	}
	ctx, count := withUploadCounter(ctx)
	if err := pusher.Push(ctx, repo.Digest(digest.String()), image); err != nil {
		return v1.Hash{}, int(count.Load()), pushError(err, repo.String())
	}
	return digest, int(count.Load()), nil
}

// newPusher returns a pusher for one call. Pushers are not kept between
// builds: a pusher remembers every blob and manifest it wrote and never
// checks them again, which would be wrong once the registry loses them
// (a restarted local registry without storage, garbage collection).
func (b *Builder) newPusher() (*remote.Pusher, error) {
	return remote.NewPusher(b.remoteOpts...)
}

// tagsFor returns the content tag, then the rendered tags, without
// duplicates, each checked to be a valid tag.
func (b *Builder) tagsFor(image string, repo name.Repository, contentHash string, render func(string) ([]string, error)) ([]string, error) {
	tags := []string{contentHash}
	if render != nil {
		rendered, err := render(contentHash)
		if err != nil {
			return nil, fmt.Errorf("image %s: tags: %w", image, err)
		}
		tags = append(tags, rendered...)
	}
	seen := map[string]bool{}
	out := tags[:0]
	for _, t := range tags {
		if seen[t] {
			continue
		}
		seen[t] = true
		if _, err := name.NewTag(repo.String()+":"+t, b.nameOpts...); err != nil {
			return nil, fault.Permanentf("image %s: %q is not a valid tag: %v", image, t, err)
		}
		out = append(out, t)
	}
	return out, nil
}

// Holds reports whether the registry still has the image name@digest and
// every tag naming it (HEAD requests only): a registry that was wiped or
// garbage-collected since the push answers false, and the caller pushes
// again.
func (b *Builder) Holds(ctx context.Context, name, digest string, tags []string) (bool, error) {
	repo, err := b.repository(name)
	if err != nil {
		return false, err
	}
	h, err := v1.NewHash(digest)
	if err != nil {
		return false, fault.Permanentf("image %s: digest %q: %v", name, digest, err)
	}
	state, err := b.inRegistry(ctx, repo, h, tags)
	if err != nil {
		return false, err
	}
	return !state.manifestMissing && len(state.tagsToMove) == 0, nil
}

// Tagged is Holds for a repository shared with others: held is whether
// the registry has name@digest and every one of tags, and moved names,
// for each tag that names another digest now, that digest. A tag that is
// missing is not held; a tag moved is for the caller to judge.
func (b *Builder) Tagged(ctx context.Context, name, digest string, tags []string) (held bool, moved map[string]string, err error) {
	repo, err := b.repository(name)
	if err != nil {
		return false, nil, err
	}
	h, err := v1.NewHash(digest)
	if err != nil {
		return false, nil, fault.Permanentf("image %s: digest %q: %v", name, digest, err)
	}
	state, err := b.inRegistry(ctx, repo, h, tags)
	if err != nil {
		return false, nil, err
	}
	// tagsToMove holds the missing tags and the moved ones (previous).
	return !state.manifestMissing && len(state.tagsToMove) == len(state.previous), state.previous, nil
}

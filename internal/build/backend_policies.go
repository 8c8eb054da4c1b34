package build

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/devloop-dev/devloop/internal/image"
)

// The policies every backend's builds follow, as decorators around a
// backend (backendFor wraps them): a backend only builds.

// onlyChanged builds nothing when the image was pushed from these inputs
// and the registry still holds it (checked at most once per verify
// interval); a lost image is built again, with b.missing set. Before a
// build it says so in status and guards the tags the push may move.
type onlyChanged struct {
	s    *imageBuilds
	next backend
}

func (d onlyChanged) build(ctx context.Context, b *imageBuild) (built, error) {
	s, img, ist := d.s, b.img, b.ist
	if ist.Inputs == b.inputs && ist.Digest != "" {
		held, err := s.stillPushed(ctx, img, ist)
		if err != nil {
			return built{}, buildError(img.Name, err)
		}
		if held {
			// Debug mode is part of the inputs, so it is what Digest was
			// built as (recorded here too for status an older operator
			// wrote).
			ist.Debug = debugBuild(s.env, img)
			return built{}, nil
		}
		// The registry lost the image (wiped, garbage-collected) or one
		// of its tags: build and push it again. A run step's builder (a
		// Job named after the inputs, or a warm build of these inputs)
		// may already have reported a digest the registry no longer
		// holds: it is run again rather than trusted.
		log.FromContext(ctx).Info("image missing from the registry; pushing it again", "image", img.Name, "digest", ist.Digest)
		b.missing = true
	}
	if s.progress != nil {
		s.progress("building image " + img.Name)
	}
	ctx = image.WithTagGuard(ctx, s.tagGuard(ctx, img, imageField(s.env, img.Name), ist.Digest, b.inputs))
	return d.next.build(ctx, b)
}

// recording writes a pushed build into the image's status (recordBuilt).
type recording struct {
	s    *imageBuilds
	next backend
}

func (d recording) build(ctx context.Context, b *imageBuild) (built, error) {
	out, err := d.next.build(ctx, b)
	if err == nil && out.result != nil {
		d.s.recordBuilt(b.img, b.ist, out.result, b.inputs, b.ref, b.tags)
	}
	return out, err
}

// publishing pushes an image a backend prepared in the operator. A
// live-updatable one may be pushed behind the live update that syncs it
// (pushbehind.go): it is recorded once its push is done, not here.
type publishing struct {
	s    *imageBuilds
	next backend
}

func (d publishing) build(ctx context.Context, b *imageBuild) (built, error) {
	out, err := d.next.build(ctx, b)
	if err != nil || out.prepared == nil {
		return out, err
	}
	s, img, p := d.s, b.img, out.prepared
	if s.e.PushBehind && mayPushBehind(img, b.ist, p) {
		s.pushBehind(ctx, img.Name, p, func(res *image.Result) {
			if ist := b.st.Image(img.Name); ist != nil {
				ist.Outputs = nil // only a run step has outputs
				s.recordBuilt(img, ist, res, b.inputs, b.ref, b.tags)
			}
		})
		return built{}, nil
	}
	res, err := p.Push(ctx)
	if err != nil {
		return built{}, buildError(img.Name, err)
	}
	s.assembled.keep(img.Name, res)
	b.ist.Outputs = nil // only a run step has outputs
	return built{result: res}, nil
}

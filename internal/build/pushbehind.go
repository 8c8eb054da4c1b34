package build

import (
	"context"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/engine"
	"github.com/devloop-dev/devloop/internal/image"
)

// A build that may reach the pods as a live update is pushed while the
// live update engine syncs it from the image as assembled here (issue 33:
// the sync need not wait for the registry). The registry becomes the
// truth a moment later, never skipped: the image's status names the new
// digest only once the push is done, when the live update engine joins
// it (Publishing's wait) before it writes anything of that digest. A push
// nobody joins (the reconcile ended first) leaves status at the old
// digest, and the next reconcile builds and pushes it again; a process
// that dies meanwhile leaves the same.

// mayPushBehind: an image assembled here for one platform, with
// liveUpdate, whose pods run a live-updatable build of it, changed. Any
// other build is pushed before the build step returns.
func mayPushBehind(img *v1alpha1.ImageSpec, ist *v1alpha1.ImageStatus, p *image.Prepared) bool {
	return img.LiveUpdate != nil && ist.TemplateDigest != "" && p.Image != nil &&
		p.Digest != ist.Digest && p.Digest != ist.TemplateDigest
}

// pushesBehind are a reconcile's builds being pushed, by image name.
type pushesBehind struct {
	mu      sync.Mutex
	byImage map[string]*pushBehind
}

// pushBehind is one build being pushed.
type pushBehind struct {
	name   string
	digest string
	image  v1.Image
	done   chan struct{}
	res    *image.Result
	err    error
	// record writes the pushed build into the image's status, once.
	record func(*image.Result)
	once   sync.Once
}

// pushBehind starts pushing p; record is called by the join once it
// succeeded. The push runs under ctx, the reconcile's.
func (s *imageBuilds) pushBehind(ctx context.Context, name string, p *image.Prepared, record func(*image.Result)) {
	pb := &pushBehind{name: name, digest: p.Digest, image: p.Image, done: make(chan struct{}), record: record}
	go func() {
		defer close(pb.done)
		pb.res, pb.err = p.Push(ctx)
	}()
	s.pushing.mu.Lock()
	defer s.pushing.mu.Unlock()
	if s.pushing.byImage == nil {
		s.pushing.byImage = map[string]*pushBehind{}
	}
	s.pushing.byImage[name] = pb
}

// wait joins the push: on success the build is recorded in status (once)
// and kept as assembled for this reconcile's reads; else the push's
// error, classified as a build's.
func (s *imageBuilds) wait(ctx context.Context, pb *pushBehind) error {
	select {
	case <-pb.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if pb.err != nil {
		return buildError(pb.name, pb.err)
	}
	pb.once.Do(func() {
		s.assembled.keep(pb.name, pb.res)
		pb.record(pb.res)
	})
	return nil
}

// Publishing is the build of image this reconcile is pushing while the
// live update syncs it, if any: its digest, the image as assembled (read
// from the source on disk), and wait, which waits for the push and only
// then records the digest in the image's status (its error is the
// push's). Without one, wait is nil.
func (e *Engine) Publishing(req engine.Request, image string) (string, v1.Image, func(context.Context) error) {
	s := e.sessionFor(req)
	s.pushing.mu.Lock()
	pb := s.pushing.byImage[image]
	s.pushing.mu.Unlock()
	if pb == nil {
		return "", nil, nil
	}
	return pb.digest, pb.image, func(ctx context.Context) error { return s.wait(ctx, pb) }
}

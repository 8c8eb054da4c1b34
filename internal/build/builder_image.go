package build

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/memo"
	"github.com/devloop-dev/devloop/internal/message"
)

// Builder images by digest (issue 34 item 4): a run.image given by a tag
// ("golang:1.25") is resolved like a base image, at most once per base
// interval or reconcile request, and builders run "golang:1.25@sha256:…"
// (the tag kept for people, the digest for nodes): a node never runs a
// stale image it cached under the tag, and a moved tag is a new input, so
// every image built in it is built again, in a new Job or a replaced warm
// builder.
//
// Unlike a base image, the builder image is pulled by nodes, never by the
// operator, so the operator may have no way to its registry (a cluster
// whose nodes pull through a mirror the operator cannot reach). A builder
// image the operator cannot resolve is used by its tag as written, and a
// Warning event says so; the build is not held up by it.

// pinRunImage pins the run step's image of a rendered copy of an image
// spec (renderRun's): the builder's digest is an input like the base's.
// An image without a run step is left as it is.
func (s *imageBuilds) pinRunImage(ctx context.Context, rendered *v1alpha1.ImageSpec) {
	if rendered.Run != nil {
		rendered.Run.Image = s.pinBuilder(ctx, rendered.Name, rendered.Run.Image)
	}
}

// pinBuilder returns run.image pinned to the digest its tag names now,
// or as written when it names a digest already or cannot be resolved.
func (s *imageBuilds) pinBuilder(ctx context.Context, imageName, builder string) string {
	if builder == "" || digestOf(builder) != "" {
		return builder
	}
	interval := s.e.Options.BaseInterval
	if interval <= 0 {
		interval = time.Minute
	}
	key := memo.Key(s.env.UID, "builder/"+builder)
	request := s.env.Annotations[v1alpha1.ReconcileRequestAnnotation]
	last, known := s.e.recent.Get(key)
	if known && last.request == request && time.Since(last.at) < interval {
		s.next.RequeueWithin(time.Until(last.at.Add(interval)))
		return pinned(builder, last.digest)
	}
	d := ""
	b, err := s.registry(ctx)
	if err == nil {
		d, err = b.ResolveBase(ctx, builder, false)
	}
	s.e.recent.Put(key, memoEntry{request: request, digest: d, at: time.Now()})
	s.next.RequeueWithin(interval)
	switch {
	case err != nil:
		log.FromContext(ctx).Info("builder image not resolved; builders pull its tag", "image", imageName, "run.image", builder, "error", err.Error())
		if s.e.Events != nil && (!known || last.digest != "") {
			s.e.Events.Eventf(s.env, nil, corev1.EventTypeWarning, "BuilderImageNotPinned", "Build",
				"image %s: run.image %s: %s; builders pull the tag as written", imageName, builder, message.Truncate(err.Error(), 300))
		}
	case s.e.Events != nil && (!known || last.digest != d):
		s.e.Events.Eventf(s.env, nil, corev1.EventTypeNormal, "BuilderImagePinned", "Build",
			"image %s: run.image %s is %s", imageName, builder, d)
	}
	return pinned(builder, d)
}

// pinned is ref@digest, or ref without a digest.
func pinned(ref, digest string) string {
	if digest == "" {
		return ref
	}
	return ref + "@" + digest
}

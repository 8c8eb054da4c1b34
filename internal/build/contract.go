package build

import (
	"context"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/engine"
)

// sessionKey holds a reconcile's build session in its engine.Pass.
type sessionKey struct{}

// sessionFor is this reconcile's builds of req.Env, made on first use and
// shared by every component: the registry client is made once.
func (e *Engine) sessionFor(req engine.Request) *imageBuilds {
	return engine.Shared(req.Pass, sessionKey{}, func() *imageBuilds {
		return &imageBuilds{e: e, env: req.Env, tenant: req.Tenant, sources: req.Sources}
	})
}

// Reconcile brings every image of req.Component to its inputs (the
// engine contract). While a builder runs the component is Building and
// the result says what it waits for; once every image is built the phase
// is left to the engines after it.
func (e *Engine) Reconcile(ctx context.Context, req engine.Request) (engine.Result, error) {
	if req.Component == nil || len(req.Component.Images) == 0 {
		return engine.Result{}, nil
	}
	s := e.sessionFor(req)
	s.progress = req.Progress
	built, msg, err := s.buildImages(ctx, req.Component, req.Status)
	err = e.noSuchHosts.check(req.Env.UID, req.Component.Name, err, err == nil && !built)
	res := s.next
	if err != nil || built {
		return res, err
	}
	res.Phase, res.Message = v1alpha1.PhaseBuilding, msg
	return res, nil
}

// Finalize forgets what the engine remembers of a deleted environment
// (req.Component nil); built images stay in the registry.
func (e *Engine) Finalize(_ context.Context, req engine.Request) error {
	if req.Component == nil {
		e.recent.Forget(req.Env.UID)
		e.progress.Forget(req.Env.UID)
		e.disruptions.Forget(req.Env.UID)
		e.noSuchHosts.forget(req.Env.UID)
		e.jobFailures.Forget(req.Env.UID)
	}
	return nil
}

// PushedImage reads an image req.Env pushed, by digest, with this
// reconcile's registry client (see Builder.PushedImage; platform picks
// one of an index's images): the live update engine compares two builds'
// files with it. An image of one platform this reconcile built
// in-process (and pushed) is the one it assembled: its changed layer is
// listed and copied from the source on disk, not downloaded twice from
// the registry.
func (e *Engine) PushedImage(ctx context.Context, req engine.Request, image, digest, platform string) (v1.Image, error) {
	s := e.sessionFor(req)
	if platform == "" {
		if img := s.assembled.get(image, digest); img != nil {
			return img, nil
		}
	}
	b, err := s.registry(ctx)
	if err != nil {
		return nil, err
	}
	return b.PushedImage(ctx, image, digest, platform)
}

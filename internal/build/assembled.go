package build

import (
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/devloop-dev/devloop/internal/image"
)

// assembledImages are the images one reconcile built in-process and
// pushed, as assembled: the same bytes the registry now holds under their
// digest (the digest is computed from them), read from the source content
// this reconcile fetched. They live as long as the reconcile's build
// session, so the content under them is not collected meanwhile.
type assembledImages struct {
	mu     sync.Mutex
	images map[assembledKey]v1.Image
}

type assembledKey struct{ image, digest string }

// keep remembers a build's image when it was assembled here (one
// platform); an index or a builder Job's image is read from the registry.
func (a *assembledImages) keep(name string, res *image.Result) {
	if res == nil || res.Image == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.images == nil {
		a.images = map[assembledKey]v1.Image{}
	}
	a.images[assembledKey{name, res.Digest}] = res.Image
}

// get is the image built here as digest, or nil.
func (a *assembledImages) get(image, digest string) v1.Image {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.images[assembledKey{image, digest}]
}

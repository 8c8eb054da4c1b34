package build

import (
	"context"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// PushedImage reads an image of the environment by digest (see
// image.Builder.PushedImage), with this reconcile's registry client.
func (s *Session) PushedImage(ctx context.Context, image, digest string) (v1.Image, error) {
	b, err := s.registry(ctx)
	if err != nil {
		return nil, err
	}
	return b.PushedImage(ctx, image, digest)
}

package build

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/devloop-dev/devloop/internal/source"
)

// inProcess assembles an image without a run step in the operator, from
// the fetched source, with internal/image. It returns the image prepared,
// not pushed: the publishing decorator pushes it (now, or behind the live
// update).
type inProcess struct{ s *imageBuilds }

func (p inProcess) build(ctx context.Context, b *imageBuild) (built, error) {
	s, img, spec := p.s, b.img, b.spec
	dir := ""
	if img.Source != "" {
		a, err := s.sources.Artifact(ctx, img.Source)
		if err != nil {
			return built{}, err
		}
		dir = a.Dir
		spec.Prebuilt = a.Prebuilt
		if a.Kind == source.KindOCI {
			spec.SourceRepository = a.URL
		}
	}
	reg, err := s.registry(ctx)
	if err != nil {
		return built{}, err
	}
	log.FromContext(ctx).Info("building image in-process", "image", img.Name, "revision", b.ref.Revision)
	prepared, err := reg.Prepare(ctx, spec, dir, b.tags.Render)
	if err != nil {
		return built{}, buildError(img.Name, err)
	}
	return built{prepared: prepared}, nil
}

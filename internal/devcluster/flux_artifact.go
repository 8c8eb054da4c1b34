package devcluster

import (
	"context"
	"fmt"
	"io"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/devloop-dev/devloop/internal/source"
)

// Media types of an artifact `flux push artifact` writes; source-controller
// extracts the layer of FluxContentMediaType an OCIRepository's
// layerSelector names (its first layer without one) as a tar+gzip.
const (
	FluxConfigMediaType  types.MediaType = "application/vnd.cncf.flux.config.v1+json"
	FluxContentMediaType types.MediaType = "application/vnd.cncf.flux.content.v1.tar+gzip"
)

// PushFluxArtifact packs dir as `flux push artifact` does — an OCI
// manifest, Flux's config media type, one tar+gzip layer of Flux's content
// media type — and pushes it to ref (repository:tag) on the cluster's
// registry. The tar is devloop's reproducible one (source.PackDir): the
// same tree gives the same digest. revision becomes the
// org.opencontainers.image.revision annotation, as `flux push --revision`.
func PushFluxArtifact(ctx context.Context, dir, ref, revision string) (string, error) {
	packed, err := source.PackDirOneLayer(dir, nil, source.CompressionGzip)
	if err != nil {
		return "", err
	}
	layers, err := packed.Layers()
	if err != nil {
		return "", err
	}
	rc, err := layers[0].Compressed()
	if err != nil {
		return "", err
	}
	blob, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return "", err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, FluxConfigMediaType)
	if img, err = mutate.Append(img, mutate.Addendum{Layer: static.NewLayer(blob, FluxContentMediaType)}); err != nil {
		return "", err
	}
	img = mutate.Annotations(img, map[string]string{
		"org.opencontainers.image.revision": revision,
	}).(v1.Image)
	if err := source.PushArtifact(ctx, img, ref, source.PushOptions{Insecure: true}); err != nil {
		return "", fmt.Errorf("pushing %s to %s: %w", dir, ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		return "", err
	}
	return d.String(), nil
}

package olm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/image"
)

// CatalogConfigsLabel tells catalogd (OLM v1) where the file-based catalog
// is inside a catalog image.
const CatalogConfigsLabel = "operators.operatorframework.io.index.configs.v1"

// Images are the pushed OLM images, by digest.
type Images struct {
	Bundle, Catalog string
}

// PushImages assembles the bundle image (bundle/manifests and
// bundle/metadata at /manifests and /metadata, labelled with the bundle's
// annotations) and the catalog image (catalog/ at /configs, labelled for
// catalogd) with internal/image, and pushes them as
// <prefix>/devloop-bundle:v<version> and <prefix>/devloop-catalog:v<version>.
func PushImages(ctx context.Context, root, prefix, version string, insecure bool) (*Images, error) {
	b, err := image.NewBuilder(image.Registry{Prefix: prefix, Insecure: insecure})
	if err != nil {
		return nil, err
	}
	bundle, err := pushBundle(ctx, b, root, version)
	if err != nil {
		return nil, err
	}
	catalog, err := pushLabelled(ctx, b, "devloop-catalog", "v"+version, filepath.Join(root, "catalog"),
		[]v1alpha1.LayerMapping{{From: Package, To: "/configs/" + Package}}, map[string]string{CatalogConfigsLabel: "/configs"})
	if err != nil {
		return nil, fmt.Errorf("catalog image: %w", err)
	}
	return &Images{Bundle: bundle, Catalog: catalog}, nil
}

func pushBundle(ctx context.Context, b *image.Builder, root, version string) (string, error) {
	ref, err := pushLabelled(ctx, b, "devloop-bundle", "v"+version, filepath.Join(root, "bundle"),
		[]v1alpha1.LayerMapping{{From: "manifests", To: "/manifests"}, {From: "metadata", To: "/metadata"}}, Annotations())
	if err != nil {
		return "", fmt.Errorf("bundle image: %w", err)
	}
	return ref, nil
}

// pushLabelled assembles an image of layers from dir on scratch, adds
// labels to its config, pushes it by digest and tags it.
func pushLabelled(ctx context.Context, b *image.Builder, name, tag, dir string, layers []v1alpha1.LayerMapping, labels map[string]string) (string, error) {
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("%s: %w (run make bundle catalog)", dir, err)
	}
	img, err := b.Assemble(ctx, image.Spec{Name: name, Layers: layers}, "", dir)
	if err != nil {
		return "", err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return "", err
	}
	cfg := cf.Config
	cfg.Labels = map[string]string{}
	for k, v := range labels {
		cfg.Labels[k] = v
	}
	if img, err = mutate.Config(img, cfg); err != nil {
		return "", err
	}
	digest, _, err := b.PushImage(ctx, name, img)
	if err != nil {
		return "", err
	}
	res, err := b.Publish(ctx, name, map[string]v1.Hash{"linux/amd64": digest}, func(string) ([]string, error) { return []string{tag}, nil })
	if err != nil {
		return "", err
	}
	return res.Repository + "@" + res.Digest, nil
}

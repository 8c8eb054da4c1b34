package devcluster

import (
	"context"
	"fmt"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/image"
)

// RegistryImage is the distribution registry for the chart's bundled
// registry (registry.image): no image can be pulled from public
// registries here.
const RegistryImage = Registry + "/devloop/registry:2"

// PushRegistryImage packs this machine's Debian docker-registry (the
// distribution registry 2.8) with its shared libraries on busybox, as
// RegistryImage, its entrypoint the binary (the chart passes `serve
// CONFIG`), and returns repository@digest.
func (c *Cluster) PushRegistryImage(ctx context.Context) (string, error) {
	layers, err := toolLayers(ctx, []string{"/usr/bin/docker-registry"})
	if err != nil {
		return "", fmt.Errorf("the registry image: %w", err)
	}
	b, err := image.NewBuilder(image.Registry{Prefix: Registry + "/devloop", Insecure: true})
	if err != nil {
		return "", err
	}
	res, err := b.Build(ctx, image.Spec{Name: "registry", Base: busybox, Layers: layers, Entrypoint: []string{"/usr/bin/docker-registry"},
		Env: []v1alpha1.EnvVar{{Name: "PATH", Value: "/usr/bin:/bin"}}},
		"/", func(string) ([]string, error) { return []string{"2"}, nil })
	if err != nil {
		return "", fmt.Errorf("the registry image: %w", err)
	}
	return res.Repository + "@" + res.Digest, nil
}

package image

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/devloop-dev/devloop/internal/fault"
)

// sourceLayers makes one layer per mapping of img from the source in dir.
// The layers do not depend on the platform and are shared by all of them.
func (b *Builder) sourceLayers(img Spec, dir string) ([]v1.Layer, error) {
	if len(img.Layers) == 0 {
		return nil, nil
	}
	if dir == "" {
		return nil, fault.Permanentf("image %s: has layers but no source directory", img.Name)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fault.Permanentf("image %s: source directory %s does not exist", img.Name, dir)
		}
		return nil, err
	}
	defer root.Close()

	layers := make([]v1.Layer, len(img.Layers))
	for i, m := range img.Layers {
		plan, err := planMapping(root, img.Name, m, false)
		if err != nil {
			return nil, err
		}
		relocateLive(plan, img.LivePaths)
		if layers[i], err = b.sourceLayer(img, dir, plan); err != nil {
			return nil, explain(err, "image %s: layer from %q: %v", img.Name, m.From, err)
		}
	}
	return layers, nil
}

// sourceLayer makes the layer of one planned mapping: the source's
// prebuilt blob when it is the same, else a plain tar for a local registry
// and a gzip for any other.
func (b *Builder) sourceLayer(img Spec, dir string, plan *layerPlan) (v1.Layer, error) {
	writeTar := func(w io.Writer) error { return writeLayerTar(w, dir, plan.entries) }
	if !b.uncompressed {
		return newSourceLayer(writeTar, &b.compressed)
	}
	if p := prebuiltFor(img, plan); p != nil {
		l, ok, err := newPrebuiltLayer(writeTar, p)
		if err != nil {
			return nil, err
		}
		if ok {
			return b.mountable(l, img, p), nil
		}
	}
	return newUncompressedLayer(writeTar)
}

// basesFor fetches base and picks its image for each platform, with its
// config.
func (b *Builder) basesFor(ctx context.Context, img Spec, platforms []v1.Platform) ([]v1.Image, error) {
	base, err := b.fetchBase(ctx, img.Name, img.Base, img.BaseInsecure)
	if err != nil {
		return nil, err
	}
	bases := make([]v1.Image, len(platforms))
	for i, p := range platforms {
		if bases[i], err = base.forPlatform(p); err != nil {
			return nil, err
		}
	}
	return bases, nil
}

// assembleAll builds img for every platform on its base (bases, in the
// order of platforms) from the shared layers.
func assembleAll(bases []v1.Image, img Spec, layers []v1.Layer, platforms []v1.Platform) ([]platformImage, error) {
	out := make([]platformImage, len(platforms))
	for i, p := range platforms {
		image, err := withLayersAndConfig(bases[i], img, layers, p)
		if err == nil {
			// The digest needs the base's config, fetched here: an error is
			// the base registry's.
			_, err = image.Digest()
		}
		if err != nil {
			return nil, baseError(err, img.Name, img.Base)
		}
		out[i] = platformImage{platform: p, image: image}
	}
	return out, nil
}

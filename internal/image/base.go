package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/cache"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/devloop-dev/devloop/internal/fault"
)

// baseImage is the base of one build, fetched once for all its platforms.
type baseImage struct {
	// image is the name of the image being built, for messages.
	image string
	// ref is the base as written in the spec; empty is scratch.
	ref string
	// digest is what ref named when it was fetched: every platform comes
	// from this one manifest, even if the tag moves during the build.
	digest name.Digest
	desc   *remote.Descriptor
	cache  cache.Cache
}

// parseReference parses an image reference. Only references to the
// environment's own registry may use plain HTTP (when it is insecure).
func (b *Builder) parseReference(ref string) (name.Reference, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, err
	}
	if b.insecure && r.Context().RegistryStr() == b.registryHost {
		return name.ParseReference(ref, name.Insecure)
	}
	return r, nil
}

// parseBase parses a base image reference; insecure (the image's
// baseInsecure) allows plain HTTP to its registry whatever it is.
func (b *Builder) parseBase(ref string, insecure bool) (name.Reference, error) {
	if !insecure {
		return b.parseReference(ref)
	}
	r, err := name.ParseReference(ref, name.Insecure)
	if err == nil && b.guard != nil {
		b.guard.allowPlainHTTP(r.Context().RegistryStr())
	}
	return r, err
}

// fetchBase resolves the base of image to a digest and fetches its
// manifest (an image or an index): one GET, nothing else is downloaded.
func (b *Builder) fetchBase(ctx context.Context, image, base string, insecure bool) (*baseImage, error) {
	if base == "" {
		return &baseImage{image: image}, nil
	}
	ref, err := b.parseBase(base, insecure)
	if err != nil {
		return nil, fault.Permanentf("image %s: base image %q is not a valid reference: %v", image, base, err)
	}
	desc, err := b.puller.Get(ctx, ref)
	if err != nil {
		return nil, baseError(err, image, base)
	}
	return &baseImage{
		image:  image,
		ref:    base,
		digest: ref.Context().Digest(desc.Digest.String()),
		desc:   desc,
		cache:  b.baseCache(ref.Context()),
	}, nil
}

// baseCache is the layer cache of one base repository, nil without a
// cache directory. The cache is shared by every environment's builds, and
// a layer in it is served without asking the registry: keyed by digest
// alone, it would hand a private base's layers to anyone whose manifest
// (from a registry of their own) lists those digests. So each origin
// (registry, repository and scheme) has its own cache, and a layer is
// served only to builds whose manifest came from that origin, fetched
// with their own credentials on every build: that fetch is the access
// check. A layer shared by two repositories is downloaded once for each.
func (b *Builder) baseCache(repo name.Repository) cache.Cache {
	if b.cacheDir == "" {
		return nil
	}
	sum := sha256.Sum256([]byte(repo.Scheme() + "://" + repo.Name()))
	return cache.NewFilesystemCache(filepath.Join(b.cacheDir, hex.EncodeToString(sum[:12])))
}

// forPlatform returns the base image for platform p: the matching manifest
// of an index, or the image itself if it is of that platform.
func (bi *baseImage) forPlatform(p v1.Platform) (v1.Image, error) {
	if bi.desc == nil {
		return scratch(p)
	}
	var img v1.Image
	switch {
	case bi.desc.MediaType.IsIndex():
		idx, err := bi.desc.ImageIndex()
		if err != nil {
			return nil, baseError(err, bi.image, bi.ref)
		}
		manifest, err := idx.IndexManifest()
		if err != nil {
			return nil, baseError(err, bi.image, bi.ref)
		}
		var have []string
		for _, m := range manifest.Manifests {
			if m.Platform == nil || !m.MediaType.IsImage() {
				continue
			}
			if m.Platform.Satisfies(p) {
				if img, err = idx.Image(m.Digest); err != nil {
					return nil, baseError(err, bi.image, bi.ref)
				}
				break
			}
			have = append(have, m.Platform.String())
		}
		if img == nil {
			return nil, fault.Permanentf("image %s: base image %s has no %s manifest (it has %s)", bi.image, bi.ref, p.String(), strings.Join(have, ", "))
		}
		if err := bi.checkConfigSize(img); err != nil {
			return nil, err
		}
	case bi.desc.MediaType.IsImage():
		var err error
		if img, err = bi.desc.Image(); err != nil {
			return nil, baseError(err, bi.image, bi.ref)
		}
		if err := bi.checkConfigSize(img); err != nil {
			return nil, err
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			return nil, baseError(err, bi.image, bi.ref)
		}
		if have := cfg.Platform(); have != nil && !have.Satisfies(p) {
			return nil, fault.Permanentf("image %s: base image %s is %s only, not %s", bi.image, bi.ref, have.String(), p.String())
		}
	default:
		return nil, fault.Permanentf("image %s: base image %s is a %s, not an image", bi.image, bi.ref, bi.desc.MediaType)
	}
	if bi.cache != nil {
		img = &cachedBase{Image: cache.Image(img, bi.cache), ref: bi.digest}
	}
	return img, nil
}

// maxBaseConfig bounds the config blob of a base image, which is read
// whole into the operator's memory: the registry is the tenant's choice,
// and the manifest's size for it is what the client reads up to. Real
// configs take kilobytes.
const maxBaseConfig = 8 << 20

// checkConfigSize refuses a base whose config is larger than
// maxBaseConfig, before it is read.
func (bi *baseImage) checkConfigSize(img v1.Image) error {
	m, err := img.Manifest()
	if err != nil {
		return baseError(err, bi.image, bi.ref)
	}
	if m.Config.Size > maxBaseConfig {
		return fault.Permanentf("image %s: base image %s: its config takes %d bytes, more than the %d the operator reads", bi.image, bi.ref, m.Config.Size, maxBaseConfig)
	}
	return nil
}

// scratch is the empty base for platform p, with OCI media types.
func scratch(p v1.Platform) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg := cf.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Variant = p.OS, p.Architecture, p.Variant
	return mutate.ConfigFile(img, cfg)
}

// cachedBase reads the base's layers through the disk cache, and still
// presents them as mountable from the base's repository: cache.Image alone
// hides that, and a push to the same registry would then download and
// upload every base layer instead of mounting it.
type cachedBase struct {
	v1.Image
	ref name.Reference
}

// Layers are the cached layers, mountable from the base repository.
func (c *cachedBase) Layers() ([]v1.Layer, error) {
	ls, err := c.Image.Layers()
	if err != nil {
		return nil, err
	}
	out := make([]v1.Layer, len(ls))
	for i, l := range ls {
		out[i] = &remote.MountableLayer{Layer: l, Reference: c.ref}
	}
	return out, nil
}

// LayerByDigest is the cached layer, mountable from the base repository.
func (c *cachedBase) LayerByDigest(h v1.Hash) (v1.Layer, error) {
	l, err := c.Image.LayerByDigest(h)
	if err != nil {
		return nil, err
	}
	return &remote.MountableLayer{Layer: l, Reference: c.ref}, nil
}

package image

import (
	"archive/tar"
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path"
	"slices"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/source"
)

// PrebuildLayers makes, from a directory about to be pushed as a source,
// the layers the operator would build from it for images: the layers of
// images that copy the source's files without a run step (the caller
// passes those). The push carries them as mapped layers
// (source.MappedLayer), so the bytes of a changed binary travel to the
// registry once instead of twice.
//
// A mapping is left to the operator when its files could not be put back
// in the source as they are: a path that is or passes through a symlink,
// a file the push leaves out (exclude), or two mappings of the same or
// nested paths. Errors the operator would report (a missing path) also
// leave the mapping to it, so it reports them.
func PrebuildLayers(dir string, images []v1alpha1.ImageSpec, exclude source.ExcludeFunc) ([]source.MappedLayer, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()

	var plans []*layerPlan
	for _, img := range images {
		for _, m := range img.Layers {
			if p := prebuildPlan(root, img.Name, m, exclude); p != nil {
				plans = append(plans, p)
			}
		}
	}
	var out []source.MappedLayer
	for _, p := range distinctPlans(plans) {
		var buf bytes.Buffer
		buf.Grow(tarSize(p.entries))
		if err := writeLayerTar(&buf, dir, p.entries); err != nil {
			return nil, err
		}
		out = append(out, source.MappedLayer{From: p.from, To: p.to,
			Layer: static.NewLayer(buf.Bytes(), types.OCIUncompressedLayer)})
	}
	return out, nil
}

// prebuildPlan plans mapping m for a push, or returns nil when it is left
// to the operator.
func prebuildPlan(root *os.Root, image string, m v1alpha1.LayerMapping, exclude source.ExcludeFunc) *layerPlan {
	p, err := planMapping(root, image, m, true)
	if err != nil || p.from == "." {
		return nil
	}
	// The store puts the files back at from; a symlink on the way would
	// come back as what it points to.
	for dir := p.from; dir != "."; dir = path.Dir(dir) {
		fi, err := root.Lstat(dir)
		if err != nil || fi.Mode()&os.ModeSymlink != 0 {
			return nil
		}
		if exclude != nil && exclude(dir, fi.IsDir()) {
			return nil
		}
	}
	for _, e := range p.entries {
		if e.source != "" && exclude != nil && exclude(e.source, e.typeflag == tar.TypeDir) {
			return nil
		}
	}
	return p
}

// distinctPlans drops plans whose source paths are shared with or nested in
// another's, unless they are the same mapping.
func distinctPlans(plans []*layerPlan) []*layerPlan {
	var out []*layerPlan
	for i, p := range plans {
		keep := true
		for j, o := range plans {
			if i == j || !(source.Covers(o.from, p.from) || source.Covers(p.from, o.from)) {
				continue
			}
			if o.from != p.from || o.to != p.to || !slices.Equal(o.entries, p.entries) {
				keep = false // a conflict: neither is mapped
				break
			}
			if j < i {
				keep = false // the same mapping, kept once
				break
			}
		}
		if keep {
			out = append(out, p)
		}
	}
	return out
}

// prebuiltFor is the source's mapped layer of the same paths as p, if any.
func prebuiltFor(img Spec, p *layerPlan) *source.PrebuiltLayer {
	for i := range img.Prebuilt {
		if l := &img.Prebuilt[i]; l.From == p.from && l.To == p.to {
			return l
		}
	}
	return nil
}

// errDiffers stops writing a layer that is not the prebuilt one.
var errDiffers = errors.New("layer differs from the prebuilt blob")

// newPrebuiltLayer returns the layer writeTar writes as the prebuilt blob
// p, if the two are byte for byte the same: then the blob's digest
// (verified when the store fetched it) is the layer's, without hashing it
// again. ok is false when they differ (a push by another version, a
// different mapping), and the layer is built as any other.
func newPrebuiltLayer(writeTar func(io.Writer) error, p *source.PrebuiltLayer) (*sourceLayer, bool, error) {
	f, err := os.Open(p.File)
	if err != nil {
		return nil, false, nil // the store lost it: build as usual
	}
	defer f.Close()
	cmp := &comparingWriter{r: bufio.NewReaderSize(f, 1<<20)}
	switch err := writeTar(cmp); {
	case errors.Is(err, errDiffers):
		return nil, false, nil
	case err != nil:
		return nil, false, err
	}
	if _, err := cmp.r.ReadByte(); err != io.EOF || cmp.n != p.Size {
		return nil, false, nil // the blob is longer
	}
	digest, err := v1.NewHash(p.Digest)
	if err != nil {
		return nil, false, nil
	}
	return &sourceLayer{writeTar: writeTar, mediaType: types.OCIUncompressedLayer, diffID: digest,
		blob: blobInfo{digest: digest, size: p.Size}, file: p.File}, true, nil
}

// comparingWriter compares what is written with what r reads.
type comparingWriter struct {
	r   *bufio.Reader
	buf []byte
	n   int64
}

func (c *comparingWriter) Write(p []byte) (int, error) {
	if cap(c.buf) < len(p) {
		c.buf = make([]byte, len(p))
	}
	b := c.buf[:len(p)]
	if _, err := io.ReadFull(c.r, b); err != nil || !bytes.Equal(b, p) {
		return 0, errDiffers
	}
	c.n += int64(len(p))
	return len(p), nil
}

// mountable lets the upload of l mount the prebuilt blob from the source's
// repository instead of sending it, when both are in this registry.
func (b *Builder) mountable(l *sourceLayer, img Spec, p *source.PrebuiltLayer) v1.Layer {
	if img.SourceRepository == "" {
		return l
	}
	repo, err := name.NewRepository(img.SourceRepository, b.nameOpts...)
	if err != nil || repo.RegistryStr() != b.registryHost {
		return l
	}
	return &remote.MountableLayer{Layer: l, Reference: repo.Digest(p.Digest)}
}

package source

import (
	"os"
	"path/filepath"
	"slices"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// deltaFill makes the delta layers of one artifact whole while it is
// fetched into a store entry.
type deltaFill struct {
	layers []v1.Layer
	descs  []v1.Descriptor
	// scratch holds the bases downloaded and the layers made whole; entry
	// is the entry being filled, where each base is linked, so the newest
	// entry of a source keeps the base its next delta is likely made
	// against.
	scratch, entry string
	limit          int64
	// local are the bases found in the store (keptBlobs), by layer index:
	// they are not downloaded.
	local map[int]*os.File
	// bases are the digests of the bases linked into entry.
	bases []string
}

// newDeltaFill opens the bases of descs the store already holds for
// origin. close must be called.
func newDeltaFill(kept *keptBlobs, origin string, layers []v1.Layer, descs []v1.Descriptor, scratch, entry string, limit int64) *deltaFill {
	d := &deltaFill{layers: layers, descs: descs, scratch: scratch, entry: entry, limit: limit, local: map[int]*os.File{}}
	for i, desc := range descs {
		if desc.MediaType != MediaTypeDeltaBase {
			continue
		}
		if f, ok := kept.open(origin, desc.Digest); ok {
			d.local[i] = f
		}
	}
	return d
}

// skip says which layers are not to be downloaded: the bases found here.
func (d *deltaFill) skip(i int) bool { return d.local[i] != nil }

func (d *deltaFill) close() {
	for _, f := range d.local {
		_ = f.Close()
	}
}

// whole is the mapped layer delta, layer i of the artifact, stands for:
// its base must be an earlier layer of the artifact, of MediaTypeDeltaBase.
// The bases not in the store are among downloads.
func (d *deltaFill) whole(downloads *prefetch, i int, delta v1.Layer, desc v1.Descriptor, isMapped bool) (v1.Layer, v1.Descriptor, string, error) {
	if !isMapped {
		return nil, desc, "", unsafeContent("a delta layer must be a mapped layer (%s, %s)", AnnotationLayerFrom, AnnotationLayerTo)
	}
	t, err := parseDeltaTarget(desc.Annotations)
	if err != nil {
		return nil, desc, "", err
	}
	j := slices.IndexFunc(d.descs[:i], func(o v1.Descriptor) bool { return o.MediaType == MediaTypeDeltaBase && o.Digest == t.base })
	if j < 0 {
		return nil, desc, "", unsafeContent("delta layer: its base %s is not a layer of the artifact before it", t.base)
	}
	base, release, err := d.base(downloads, j)
	if err != nil {
		return nil, desc, "", err
	}
	defer release()
	d.keep(base.Name(), t.base)
	return applyDeltaLayer(delta, base, desc, t, d.scratch, d.limit)
}

// base opens layer j, a delta's base: the file the store holds, or
// downloaded. release closes what base opened.
func (d *deltaFill) base(downloads *prefetch, j int) (*os.File, func(), error) {
	if f := d.local[j]; f != nil {
		return f, func() {}, nil // closed by close
	}
	base, baseFile, err := downloads.layer(j, d.layers[j])
	if err != nil {
		return nil, nil, err
	}
	if baseFile == "" {
		// The artifact's first layer, read from the registry as it goes:
		// downloaded here (the registry client checks its digest).
		baseFile = filepath.Join(d.scratch, "delta-base-"+d.descs[j].Digest.Hex)
		pl := &prefetchedLayer{file: baseFile}
		if err := downloads.download(base, pl); err != nil {
			return nil, nil, err
		}
	}
	f, err := os.Open(baseFile)
	if err != nil {
		return nil, nil, err
	}
	return f, func() { _ = f.Close() }, nil
}

// keep links a base into the entry's layers, once; a base that cannot be
// linked (another file system) is only not kept.
func (d *deltaFill) keep(file string, digest v1.Hash) {
	if slices.Contains(d.bases, digest.String()) {
		return
	}
	kept := filepath.Join(d.entry, blobFile(digest))
	if err := os.MkdirAll(filepath.Dir(kept), 0o755); err != nil {
		return
	}
	if err := os.Link(file, kept); err != nil && !os.IsExist(err) {
		return
	}
	d.bases = append(d.bases, digest.String())
}

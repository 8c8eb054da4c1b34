package source

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strconv"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/devloop-dev/devloop/internal/supervisor"
)

// A binary pushed across a slow uplink is tens of MiB each change, though
// a rebuild differs from the last one in a few places. A mapped layer may
// therefore be pushed as a delta against a base the registry already
// holds (an earlier push's layer of the same mapping): the artifact names
// the base as a layer of its own media type (so the registry keeps it and
// the fetcher finds it) and the delta as another, annotated with the
// layer it makes. The fetcher applies the delta to the base, checks the
// result's digest and size, and uses it as the mapped layer it stands for.
const (
	// MediaTypeDeltaBase is a layer that is only the base of a delta
	// layer after it; it is not extracted.
	MediaTypeDeltaBase types.MediaType = "application/vnd.devloop.layer.delta-base.v1.tar"
	// MediaTypeDelta is a mapped layer sent as supervisor.EncodeDelta's
	// ops against its base.
	MediaTypeDelta types.MediaType = "application/vnd.devloop.layer.delta.v1"

	// AnnotationDeltaBase names the delta's base blob (a digest).
	AnnotationDeltaBase = "dev.devloop.delta.base"
	// AnnotationDeltaDigest and AnnotationDeltaSize are the uncompressed
	// tar the delta makes.
	AnnotationDeltaDigest = "dev.devloop.delta.digest"
	AnnotationDeltaSize   = "dev.devloop.delta.size"
)

// DeltaBase is a mapped layer's tar the registry holds, to send the next
// one against.
type DeltaBase struct {
	Digest v1.Hash
	Tar    []byte
}

// deltaAddenda are m as a delta against base: the base's layer, then the
// delta. ok is false when the delta would not be less than half the layer
// (m is then pushed whole).
func deltaAddenda(m MappedLayer, base *DeltaBase) ([]mutate.Addendum, bool, error) {
	if base == nil {
		return nil, false, nil
	}
	digest, err := m.Layer.Digest()
	if err != nil {
		return nil, false, err
	}
	if digest == base.Digest {
		return nil, false, nil // unchanged: the registry has it whole
	}
	next, err := LayerBlob(m.Layer)
	if err != nil {
		return nil, false, err
	}
	ops, ok := supervisor.EncodeDelta(base.Tar, next)
	if !ok {
		return nil, false, nil
	}
	mapping := map[string]string{AnnotationLayerFrom: m.From, AnnotationLayerTo: m.To}
	deltaNotes := map[string]string{
		AnnotationLayerFrom: m.From, AnnotationLayerTo: m.To,
		AnnotationDeltaBase: base.Digest.String(), AnnotationDeltaDigest: digest.String(),
		AnnotationDeltaSize: strconv.Itoa(len(next)),
	}
	return []mutate.Addendum{
		{Layer: static.NewLayer(base.Tar, MediaTypeDeltaBase), Annotations: mapping},
		{Layer: static.NewLayer(ops, MediaTypeDelta), Annotations: deltaNotes},
	}, true, nil
}

// LayerBlob reads a layer's blob whole, into a buffer of the layer's
// size: io.ReadAll's doubling left twice a binary of tens of MiB behind on
// every push.
func LayerBlob(l v1.Layer) ([]byte, error) {
	size, err := l.Size()
	if err != nil {
		return nil, err
	}
	rc, err := l.Compressed()
	if err != nil {
		return nil, err
	}
	defer func() { _ = rc.Close() }()
	buf := bytes.NewBuffer(make([]byte, 0, size))
	if _, err := io.Copy(buf, rc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// deltaTarget is what a delta layer's annotations say it makes.
type deltaTarget struct {
	base   v1.Hash
	digest v1.Hash
	size   int64
}

func parseDeltaTarget(a map[string]string) (deltaTarget, error) {
	var t deltaTarget
	var err error
	if t.base, err = v1.NewHash(a[AnnotationDeltaBase]); err != nil {
		return t, unsafeContent("delta layer: %s: %v", AnnotationDeltaBase, err)
	}
	if t.digest, err = v1.NewHash(a[AnnotationDeltaDigest]); err != nil || t.digest.Algorithm != "sha256" {
		return t, unsafeContent("delta layer: %s: not a sha256 digest", AnnotationDeltaDigest)
	}
	if t.size, err = strconv.ParseInt(a[AnnotationDeltaSize], 10, 64); err != nil || t.size < 0 {
		return t, unsafeContent("delta layer: %s: not a size", AnnotationDeltaSize)
	}
	return t, nil
}

// applyDeltaLayer makes the layer delta stands for from base (an
// earlier layer of the artifact, of MediaTypeDeltaBase, in a file) into a
// file under dir, and returns it as the uncompressed mapped layer it is,
// with its descriptor. Its result must be the digest and size the
// annotations name, within limit bytes. Nothing of the size of the layer
// is held in memory: the base is read in place, the delta streamed, the
// result written as it is made (an operator making two environments'
// 28.5 MiB binaries whole from buffers was OOM-killed).
func applyDeltaLayer(delta v1.Layer, base *os.File, desc v1.Descriptor, t deltaTarget, dir string, limit int64) (v1.Layer, v1.Descriptor, string, error) {
	if t.size > limit {
		return nil, v1.Descriptor{}, "", tooLarge(limit)
	}
	info, err := base.Stat()
	if err != nil {
		return nil, v1.Descriptor{}, "", err
	}
	ops, err := delta.Compressed()
	if err != nil {
		return nil, v1.Descriptor{}, "", &readError{err}
	}
	defer func() { _ = ops.Close() }()
	file := filepath.Join(dir, "delta-"+t.digest.Hex)
	f, err := os.Create(file)
	if err != nil {
		return nil, v1.Descriptor{}, "", err
	}
	err = supervisor.ApplyDelta(base, info.Size(), ops, f, t.size, t.digest.Hex)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, v1.Descriptor{}, "", unsafeContent("delta layer: does not make %s from %s: %v", t.digest, t.base, err)
	}
	whole := v1.Descriptor{MediaType: types.OCIUncompressedLayer, Digest: t.digest, Size: t.size, Annotations: desc.Annotations}
	l, err := (&prefetchedLayer{desc: whole, file: file}).asLayer()
	return l, whole, file, err
}

package source

import (
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Annotations of a source artifact layer that is a MappedLayer.
const (
	// AnnotationLayerFrom is the source path the layer's files belong at.
	AnnotationLayerFrom = "dev.devloop.layer.from"
	// AnnotationLayerTo is where the layer holds them: the image path,
	// relative to the image root ("" is the root).
	AnnotationLayerTo = "dev.devloop.layer.to"
)

// MappedLayer is a layer of a pushed source artifact that holds the files
// of one source path laid out as an image layer lays them out: under To,
// with the image's modes. `kubectl devloop push` makes one for each file
// or directory an image of the environment copies from the pushed
// directory without a run step. The store puts the files back at From, so
// the source tree is what a plain pack gives; the operator, finding that
// the layer it builds from them is byte for byte this one, mounts the blob
// the push already uploaded instead of uploading the same bytes again.
type MappedLayer struct {
	// From is the source path, slash-separated, relative to the root.
	From string
	// To is the image path the files are under, relative to the image
	// root; "" is the root.
	To string
	// Layer is the blob, an uncompressed tar.
	Layer v1.Layer
	// Base, when set, is an earlier push's layer of the same mapping that
	// the registry holds: the layer is pushed as a delta against it when
	// that is less than half its size (delta_layer.go).
	Base *DeltaBase
}

// PrebuiltLayer is a MappedLayer of a fetched artifact: where its files
// came from and its blob, kept in the store beside the tree.
type PrebuiltLayer struct {
	From      string          `json:"from"`
	To        string          `json:"to"`
	Digest    string          `json:"digest"`
	Size      int64           `json:"size"`
	MediaType types.MediaType `json:"mediaType"`
	// File is the blob's path: relative to the entry in the store's
	// metadata, absolute in an Artifact.
	File string `json:"file"`
}

// mapping renames the entries of a mapped layer back to the source path
// they came from.
type mapping struct{ from, to string }

// parseMapping reads a layer's annotations; ok is false for an ordinary
// layer.
func parseMapping(annotations map[string]string) (m mapping, ok bool, err error) {
	from, hasFrom := annotations[AnnotationLayerFrom]
	to, hasTo := annotations[AnnotationLayerTo]
	if !hasFrom && !hasTo {
		return mapping{}, false, nil
	}
	if !hasFrom || !hasTo {
		return mapping{}, false, unsafeContent("a mapped layer needs both %s and %s", AnnotationLayerFrom, AnnotationLayerTo)
	}
	if from != path.Clean(from) || !filepath.IsLocal(filepath.FromSlash(from)) {
		return mapping{}, false, unsafeContent("mapped layer from %q is not a clean path inside the source", from)
	}
	if to != "" && (to != path.Clean(to) || !filepath.IsLocal(filepath.FromSlash(to))) {
		return mapping{}, false, unsafeContent("mapped layer to %q is not a clean relative image path", to)
	}
	return mapping{from: from, to: to}, true, nil
}

// rename maps an entry name of the layer (clean, slash-separated) to its
// source path; skip is true for the image's parent directories of To,
// which have no place in the source.
func (m mapping) rename(name string, isDir bool) (out string, skip bool, err error) {
	switch {
	case m.to == "":
		if name == "." {
			return m.from, false, nil
		}
		return path.Join(m.from, name), false, nil
	case name == m.to:
		return m.from, false, nil
	case strings.HasPrefix(name, m.to+"/"):
		return path.Join(m.from, strings.TrimPrefix(name, m.to+"/")), false, nil
	case isDir && (name == "." || strings.HasPrefix(m.to, name+"/")):
		return "", true, nil
	}
	return "", false, unsafeContent("mapped layer for %q holds %q, which is not under %q", m.from, name, m.to)
}

// Covers reports whether rel (slash-separated) is from or under it.
func Covers(from, rel string) bool {
	return rel == from || strings.HasPrefix(rel, from+"/")
}

// StoredMode is the mode a file of a source has once in the store: only
// whether it is executable survives. A MappedLayer's files must have it,
// since the operator builds from the stored tree.
func StoredMode(m fs.FileMode) fs.FileMode { return fileMode(m) }

// isUncompressed says whether a layer's blob is its tar.
func isUncompressed(mt types.MediaType) bool {
	return mt == types.OCIUncompressedLayer || mt == types.DockerUncompressedLayer
}

// validateMapped checks what a push is about to write: mapped layers must
// not overlap, and must be uncompressed.
func validateMapped(mapped []MappedLayer) error {
	for i, m := range mapped {
		if _, _, err := parseMapping(map[string]string{AnnotationLayerFrom: m.From, AnnotationLayerTo: m.To}); err != nil {
			return err
		}
		mt, err := m.Layer.MediaType()
		if err != nil {
			return err
		}
		if !isUncompressed(mt) {
			return fmt.Errorf("mapped layer for %q is %s; only uncompressed layers are mapped", m.From, mt)
		}
		for _, o := range mapped[:i] {
			if Covers(o.From, m.From) || Covers(m.From, o.From) {
				return fmt.Errorf("mapped layers for %q and %q overlap", o.From, m.From)
			}
		}
	}
	return nil
}

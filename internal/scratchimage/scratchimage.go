// Package scratchimage makes small reproducible images from nothing: one
// layer of files given in memory on an empty base, with OCI media types.
// Every timestamp is the Unix epoch, so the same files and config give the
// same digest, and pushing an image again uploads nothing.
//
// It serves the operator image's static base (internal/operatorimage) and
// the local cluster's pause and busybox images (hack/cluster/imagepack),
// and depends on go-containerregistry only, so the cluster's tool stays
// small to build.
package scratchimage

import (
	"archive/tar"
	"bytes"
	"io"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Epoch is the time of every tar entry; callers use it for the history and
// config times too.
var Epoch = time.Unix(0, 0).UTC()

// Entry is one regular file, directory or symlink of the layer.
type Entry struct {
	// Name is the path in the image, without a leading slash; a
	// directory's gets a trailing one if it has none.
	Name string
	Mode int64
	// UID owns the entry, as user and group.
	UID int
	// Data is a regular file's content.
	Data []byte
	// Linkname makes the entry a symlink to it.
	Linkname string
	Dir      bool
}

// Layer is an uncompressed tar layer of entries, in the order given.
func Layer(entries []Entry) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.Name, Mode: e.Mode, Uid: e.UID, Gid: e.UID, ModTime: Epoch, Format: tar.FormatPAX}
		switch {
		case e.Dir:
			h.Typeflag = tar.TypeDir
			if !strings.HasSuffix(h.Name, "/") {
				h.Name += "/"
			}
		case e.Linkname != "":
			h.Typeflag, h.Linkname = tar.TypeSymlink, e.Linkname
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.Data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(e.Data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	raw := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(raw)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// Image is the empty image plus Layer(entries), recorded with history; then
// configure sets what the image needs in (a copy of) its config file:
// platform, entrypoint, user, environment.
func Image(entries []Entry, history v1.History, configure func(*v1.ConfigFile)) (v1.Image, error) {
	layer, err := Layer(entries)
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: history})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	configure(cf)
	return mutate.ConfigFile(img, cf)
}

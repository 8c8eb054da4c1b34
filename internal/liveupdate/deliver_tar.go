package liveupdate

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/devloop-dev/devloop/internal/source"
	"github.com/devloop-dev/devloop/internal/supervisor"
)

// whiteoutPrefix marks a deleted file in a layer tar and in a sync's tar.
const whiteoutPrefix = supervisor.WhiteoutPrefix

// keptTarSize is about the size of the sync tar of files, counting the
// bodies decide kept, to grow its buffer once (source.TarEntrySize).
func keptTarSize(files []File) int {
	n := source.TarEnd
	for _, f := range files {
		var size int64
		if f.kept != nil {
			size = int64(len(f.kept.body))
		}
		n += source.TarEntrySize(len(f.Path), size)
	}
	return n
}

// WriteTar writes the files of a live update as the supervisor's sync
// reads them: an uncompressed tar of regular files (and links) under
// their absolute image paths, modes kept, each deleted file a whiteout
// entry. Directories are not sent: the supervisor makes parents. It
// stops with an error past maxBytes of content, so a change too big to
// carry in one exec is rolled out instead.
func WriteTar(w io.Writer, next v1.Image, files []File, maxBytes int64) error {
	tw := tar.NewWriter(w)
	byLayer := map[int]map[string]string{} // layer -> entry name -> image path
	var written int64
	for _, f := range files {
		if f.Deleted {
			dir, base := path.Split(f.Path)
			if err := tw.WriteHeader(&tar.Header{Name: dir + whiteoutPrefix + base, Typeflag: tar.TypeReg, Mode: 0o644}); err != nil {
				return err
			}
			continue
		}
		if f.kept != nil {
			// Read when it was compared (decide): not read again.
			h := &f.kept.header
			if h.Typeflag == tar.TypeReg && written+h.Size > maxBytes {
				return fmt.Errorf("%w (%d bytes at %s)", ErrTooBig, written+h.Size, f.Path)
			}
			if err := tw.WriteHeader(syncHeader(h, f.Path)); err != nil {
				return err
			}
			if _, err := tw.Write(f.kept.body); err != nil {
				return err
			}
			written += int64(len(f.kept.body))
			continue
		}
		if byLayer[f.layer] == nil {
			byLayer[f.layer] = map[string]string{}
		}
		byLayer[f.layer][f.entry] = f.Path
	}
	if len(byLayer) == 0 {
		return tw.Close()
	}
	layers, err := next.Layers()
	if err != nil {
		return err
	}
	order := make([]int, 0, len(byLayer))
	for i := range byLayer {
		order = append(order, i)
	}
	slices.Sort(order)
	for _, i := range order {
		want := byLayer[i]
		if i >= len(layers) {
			return fmt.Errorf("layer %d is not in the image", i)
		}
		n, err := copyEntries(tw, layers[i], want, maxBytes-written)
		written += n
		if err != nil {
			return err
		}
	}
	return tw.Close()
}

// ErrTooBig is a live update whose files exceed the size one sync
// carries.
var ErrTooBig = errors.New("the changed files are larger than a live update carries")

// copyEntries copies the entries of a layer named in want, renamed to
// their image paths, and returns the content bytes copied.
func copyEntries(tw *tar.Writer, l v1.Layer, want map[string]string, budget int64) (int64, error) {
	rc, err := l.Uncompressed()
	if err != nil {
		return 0, err
	}
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	var n int64
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		target, ok := want[cleanPath(h.Name)]
		if !ok {
			continue
		}
		if h.Typeflag == tar.TypeReg && n+h.Size > budget {
			return n, fmt.Errorf("%w (%d bytes at %s)", ErrTooBig, n+h.Size, target)
		}
		if err := tw.WriteHeader(syncHeader(h, target)); err != nil {
			return n, err
		}
		if h.Typeflag == tar.TypeReg {
			c, err := io.Copy(tw, tr)
			n += c
			if err != nil {
				return n, err
			}
		}
	}
}

// syncHeader is a layer entry's header as a sync's tar carries it: under
// its image path, only a regular file with content.
func syncHeader(h *tar.Header, target string) *tar.Header {
	out := &tar.Header{Name: target, Typeflag: h.Typeflag, Mode: h.Mode, Size: h.Size, Linkname: h.Linkname,
		Uid: h.Uid, Gid: h.Gid, ModTime: h.ModTime, Format: tar.FormatPAX}
	if h.Typeflag != tar.TypeReg {
		out.Size = 0
	}
	return out
}

package image

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/internal/source"
)

// epoch is the one timestamp of every build: tar entries, history and the
// config's created field. Anything that depends on the clock or on the
// machine would make the content hash differ between two builds of the
// same inputs, and every build would push.
var epoch = time.Unix(0, 0).UTC()

// dirMode is the mode of every directory a layer writes.
const dirMode = 0o755

// layerEntry is one planned tar entry of a layer.
type layerEntry struct {
	// name in the image, relative to /; directories end with '/'.
	name string
	// typeflag is tar.TypeDir, tar.TypeReg or tar.TypeSymlink.
	typeflag byte
	mode     int64
	// size and modTime of a regular file when planned, checked again when
	// its content is copied: the layer is read more than once (hashed,
	// compressed, maybe uploaded) and every read must see the same bytes.
	size    int64
	modTime time.Time
	// source is the entry's path relative to the source root, for all but
	// the parent directories of the mapping's target; only a regular
	// file's is read.
	source string
	// linkname is a symlink's target, copied as is.
	linkname string
}

// layerPlan is what one layer mapping writes.
type layerPlan struct {
	// from is the mapping's source path, clean and slash-separated.
	from string
	// to is the image path from is copied to, relative to the image root
	// ("" is the root), with a file copied into a directory named in full.
	to      string
	entries []layerEntry
}

// planMapping plans one layer mapping: the parent directories of `to`,
// then the file, or the directory and everything under it in name order.
// Files are read through root, which refuses any path (or symlink) leading
// out of the source: a tenant's source cannot copy the operator's own
// files into an image. storedModes gives files without a mapping mode the
// mode the source store would give them (source.StoredMode), as the
// operator sees them after a push.
func planMapping(root *os.Root, image string, m v1alpha1.LayerMapping, storedModes bool) (*layerPlan, error) {
	from := path.Clean(filepath.ToSlash(m.From))
	if !filepath.IsLocal(from) {
		return nil, fault.Permanentf("image %s: layer from %q: the path must be relative and stay inside the source", image, m.From)
	}
	if !strings.HasPrefix(m.To, "/") {
		return nil, fault.Permanentf("image %s: layer to %q: the path in the image must be absolute", image, m.To)
	}
	fileMode, hasMode, err := parseMode(m.Mode)
	if err != nil {
		return nil, fault.Permanentf("image %s: layer from %q: %v", image, m.From, err)
	}

	// The source itself may be a symlink (out/manager -> manager-linux-amd64):
	// it is followed, inside the source only. Symlinks under a copied
	// directory are copied as symlinks.
	info, err := root.Stat(from)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fault.Permanentf("image %s: layer source %q does not exist in the source", image, m.From)
		}
		return nil, fault.Permanentf("image %s: layer source %q: %v", image, m.From, err)
	}

	to := path.Clean(m.To)
	if !info.IsDir() && strings.HasSuffix(m.To, "/") {
		// Like COPY: a file copied to a directory keeps its name.
		to = path.Join(to, path.Base(from))
	}
	to = strings.TrimPrefix(to, "/")

	var entries []layerEntry
	for _, dir := range parentDirs(to) {
		entries = append(entries, layerEntry{name: dir + "/", typeflag: tar.TypeDir, mode: dirMode})
	}
	modeOf := func(fi fs.FileInfo) int64 {
		switch {
		case hasMode:
			return fileMode
		case storedModes:
			return int64(source.StoredMode(fi.Mode().Perm()))
		}
		return int64(fi.Mode().Perm())
	}

	plan := &layerPlan{from: from, to: to}
	switch {
	case info.Mode().IsRegular():
		if to == "" {
			return nil, fault.Permanentf("image %s: layer from %q: a file cannot be copied to /", image, m.From)
		}
		plan.entries = append(entries, layerEntry{name: to, typeflag: tar.TypeReg, mode: modeOf(info), size: info.Size(), modTime: info.ModTime(), source: from})
		return plan, nil
	case info.IsDir():
		if to != "" {
			entries = append(entries, layerEntry{name: to + "/", typeflag: tar.TypeDir, mode: dirMode, source: from})
		}
		plan.entries, err = walkSourceDir(root, image, from, to, modeOf, entries)
		return plan, err
	default:
		return nil, fault.Permanentf("image %s: layer source %q is not a file or a directory", image, m.From)
	}
}

// walkSourceDir appends the entries under the source directory from,
// placed under the image directory to, depth first in name order.
func walkSourceDir(root *os.Root, image, from, to string, modeOf func(fs.FileInfo) int64, entries []layerEntry) ([]layerEntry, error) {
	dir, err := root.Open(from)
	if err != nil {
		return nil, fault.Permanentf("image %s: layer source %q: %v", image, from, err)
	}
	children, err := dir.ReadDir(-1)
	dir.Close()
	if err != nil {
		return nil, fault.Permanentf("image %s: layer source %q: %v", image, from, err)
	}
	// ReadDir returns the file system's order, which differs between
	// machines; the tar must not.
	sort.Slice(children, func(i, j int) bool { return children[i].Name() < children[j].Name() })

	for _, child := range children {
		source := path.Join(from, child.Name())
		name := path.Join(to, child.Name())
		info, err := child.Info()
		if err != nil {
			return nil, fault.Permanentf("image %s: layer source %q: %v", image, source, err)
		}
		switch {
		case info.Mode().IsRegular():
			entries = append(entries, layerEntry{name: name, typeflag: tar.TypeReg, mode: modeOf(info), size: info.Size(), modTime: info.ModTime(), source: source})
		case info.IsDir():
			entries = append(entries, layerEntry{name: name + "/", typeflag: tar.TypeDir, mode: dirMode, source: source})
			if entries, err = walkSourceDir(root, image, source, name, modeOf, entries); err != nil {
				return nil, err
			}
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := root.Readlink(source)
			if err != nil {
				return nil, fault.Permanentf("image %s: layer source %q: %v", image, source, err)
			}
			entries = append(entries, layerEntry{name: name, typeflag: tar.TypeSymlink, mode: 0o777, linkname: target, source: source})
		default:
			return nil, fault.Permanentf("image %s: layer source %q is a %s: only files, directories and symlinks can be copied", image, source, info.Mode().Type())
		}
	}
	return entries, nil
}

// parentDirs lists the directories above name, outermost first:
// "usr/local/bin/manager" gives usr, usr/local, usr/local/bin.
func parentDirs(name string) []string {
	var dirs []string
	for dir := path.Dir(name); dir != "." && dir != "/"; dir = path.Dir(dir) {
		dirs = append(dirs, dir)
	}
	for i, j := 0, len(dirs)-1; i < j; i, j = i+1, j-1 {
		dirs[i], dirs[j] = dirs[j], dirs[i]
	}
	return dirs
}

// parseMode parses a mapping's octal mode ("0755", "644"); empty means the
// source's own mode.
func parseMode(s string) (mode int64, ok bool, err error) {
	if s == "" {
		return 0, false, nil
	}
	m, err := strconv.ParseUint(s, 8, 32)
	if err != nil || m > 0o777 {
		return 0, false, fmt.Errorf("mode %q is not an octal file mode like \"0755\"", s)
	}
	return int64(m), true, nil
}

// writeLayerTar writes entries as a tar that depends on nothing but the
// content: fixed timestamps, owner 0:0 without names, modes as planned.
// A file whose size changed since planning fails the write, since the layer's
// digests were computed from the planned content.
func writeLayerTar(w io.Writer, dir string, entries []layerEntry) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()

	tw := tar.NewWriter(w)
	for _, e := range entries {
		hdr := &tar.Header{
			Typeflag: e.typeflag,
			Name:     e.name,
			Linkname: e.linkname,
			Mode:     e.mode,
			Size:     e.size,
			ModTime:  epoch,
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("layer entry %s: %w", e.name, err)
		}
		if e.typeflag == tar.TypeReg {
			if err := copyFile(tw, root, e); err != nil {
				return err
			}
		}
	}
	return tw.Close()
}

// tarSize is about the size of entries' tar, to grow its buffer once
// (source.TarEntrySize).
func tarSize(entries []layerEntry) int {
	n := source.TarEnd
	for _, e := range entries {
		n += source.TarEntrySize(max(len(e.name), len(e.linkname)), e.size)
	}
	return n
}

// copyFile copies one planned file's content into the tar, and fails if
// the file is not as planned: a build racing a writer (a compiler still
// writing the binary) must fail, not push a layer whose blob and diff ID
// were read from different content.
func copyFile(tw *tar.Writer, root *os.Root, e layerEntry) error {
	f, err := root.Open(e.source)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := io.Copy(tw, f)
	if err != nil || n != e.size {
		return fmt.Errorf("source file %s changed while the layer was written (%d bytes, planned %d): %v", e.source, n, e.size, err)
	}
	info, err := f.Stat()
	if err != nil {
		return err
	}
	if !info.ModTime().Equal(e.modTime) || info.Size() != e.size {
		return fmt.Errorf("source file %s changed while the layer was written", e.source)
	}
	return nil
}

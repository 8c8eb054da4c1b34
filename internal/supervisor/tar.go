package supervisor

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
)

// WhiteoutPrefix marks a deleted file in a sync's tar, as in a layer's
// (OCI image spec); opaqueWhiteout in a directory empties that directory.
const (
	WhiteoutPrefix = ".wh."
	opaqueWhiteout = ".wh..wh..opq"
)

// applyTar writes the entries of an uncompressed tar (paths as in the
// image, absolute or not) under root, each file atomically: written to a
// temporary file next to it, then renamed over it, so the program never
// reads half a file. Modes are kept (permission bits only: no setuid once
// synced); directories are created as needed; whiteouts delete. Regular
// files, directories, symlinks and whiteouts are what a layer of changed
// files holds; anything else is refused. It returns the image paths
// written or deleted.
//
// With deltas (a delta frame), a regular file carrying DeltaSumRecord is
// a delta against the file at its path (applyDeltaFile); without, such
// an entry is refused.
func applyTar(root *os.Root, r io.Reader, deltas bool) ([]string, error) {
	tr := tar.NewReader(r)
	var changed []string
	for n := 0; ; n++ {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return changed, nil
		}
		if err != nil {
			return changed, fmt.Errorf("reading the tar of changed files: %w", err)
		}
		rel, err := cleanImagePath(hdr.Name)
		if err != nil {
			return changed, fmt.Errorf("tar entry %d: %v", n, err)
		}
		dir, base := path.Split(rel)
		dir = strings.TrimSuffix(dir, "/")
		switch {
		case base == opaqueWhiteout:
			err = emptyDir(root, dir)
			rel = dir
		case strings.HasPrefix(base, WhiteoutPrefix):
			rel = path.Join(dir, strings.TrimPrefix(base, WhiteoutPrefix))
			err = root.RemoveAll(rel)
		case hdr.Typeflag == tar.TypeReg && hdr.PAXRecords[DeltaSumRecord] != "":
			if !deltas {
				err = errors.New("a delta outside a delta frame")
				break
			}
			err = writeDeltaFile(root, rel, fs.FileMode(hdr.Mode).Perm(), tr, n, hdr.PAXRecords)
		case hdr.Typeflag == tar.TypeReg:
			err = writeFile(root, rel, fs.FileMode(hdr.Mode).Perm(), tr, n)
		case hdr.Typeflag == tar.TypeDir:
			err = root.MkdirAll(rel, fs.FileMode(hdr.Mode).Perm()|0o700)
		case hdr.Typeflag == tar.TypeSymlink:
			err = writeSymlink(root, rel, hdr.Linkname, n)
		default:
			err = fmt.Errorf("type %q is not a regular file, directory, symlink or whiteout", hdr.Typeflag)
		}
		if err != nil {
			return changed, fmt.Errorf("syncing /%s: %w", rel, err)
		}
		changed = append(changed, "/"+rel)
	}
}

// writeFile writes r to rel through a temporary file renamed into place.
func writeFile(root *os.Root, rel string, mode fs.FileMode, r io.Reader, n int) error {
	return replaceFile(root, rel, mode, n, func(f io.Writer) error {
		_, err := io.Copy(f, r)
		return err
	})
}

// replaceFile writes rel's new content with write into a temporary file
// and renames it into place; on any error the temporary file is removed
// and rel is left as it was.
func replaceFile(root *os.Root, rel string, mode fs.FileMode, n int, write func(io.Writer) error) error {
	tmp, err := prepare(root, rel, n)
	if err != nil {
		return err
	}
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// Chmod after the write: the umask would otherwise clear bits.
		err = root.Chmod(tmp, mode)
	}
	if err == nil {
		err = root.Rename(tmp, rel)
	}
	if err != nil {
		_ = root.Remove(tmp)
	}
	return err
}

// writeSymlink makes rel a symlink to target, replacing what was there.
func writeSymlink(root *os.Root, rel, target string, n int) error {
	tmp, err := prepare(root, rel, n)
	if err != nil {
		return err
	}
	if err := root.Symlink(target, tmp); err != nil {
		return err
	}
	if err := root.Rename(tmp, rel); err != nil {
		_ = root.Remove(tmp)
		return err
	}
	return nil
}

// prepare makes rel's directory and clears a directory at rel (rename
// cannot replace one with a file, and in a layer a file replaces
// whatever was at its path); it returns a temporary name next to rel.
func prepare(root *os.Root, rel string, n int) (string, error) {
	dir := path.Dir(rel)
	if dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
	}
	if st, err := root.Lstat(rel); err == nil && st.IsDir() {
		if err := root.RemoveAll(rel); err != nil {
			return "", err
		}
	}
	tmp := path.Join(dir, ".devloop-sync-"+strconv.Itoa(os.Getpid())+"-"+strconv.Itoa(n))
	_ = root.Remove(tmp) // left by a sync that died at this line
	return tmp, nil
}

// emptyDir removes what dir holds (an opaque whiteout), keeping dir.
func emptyDir(root *os.Root, dir string) error {
	if dir == "" {
		return errors.New("an opaque whiteout at the top would empty the whole live root")
	}
	f, err := root.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := root.RemoveAll(path.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

package source

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/devloop-dev/devloop/internal/fault"
)

// maxEntries bounds the number of entries of one source: a tarball of
// millions of empty files is small in bytes and still exhausts inodes.
const maxEntries = 1 << 20

// maxLinkHops bounds symlink resolution, like the kernel's ELOOP.
const maxLinkHops = 255

// unsafeContent is an archive or tree that would write or point outside
// its directory, or holds something that is not plain content.
func unsafeContent(format string, args ...any) error {
	return fault.Permanent(fmt.Errorf("unsafe content: "+format, args...))
}

func tooLarge(limit int64) error {
	return fault.Permanent(fmt.Errorf("content exceeds the maximum size of %d bytes", limit))
}

// readError is a failure to read the archive's bytes (a dropped
// connection), as opposed to bytes that are not a valid archive: the first
// is worth retrying, the second is not.
type readError struct{ err error }

func (e *readError) Error() string { return e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

// ExtractTar writes a tar archive, plain or gzip-compressed, into dir,
// which must exist. It is what every downloaded artifact goes through, so it
// refuses anything that could reach outside dir or surprise a consumer:
// absolute or escaping paths, symlinks that are absolute or resolve outside
// dir, hard links to anything but a regular file of the archive, device
// files and fifos. maxSize bounds the bytes actually written, whatever the
// headers claim, with each hard link counted at its file's size. Errors for bad archives are fault.Permanent.
func ExtractTar(r io.Reader, dir string, maxSize int64) error {
	x, err := newExtractor(dir, maxSize, false)
	if err != nil {
		return err
	}
	defer x.close()
	if err := x.add(r); err != nil {
		return err
	}
	return x.finish()
}

// extractor writes one or more archives into a directory, in order, later
// ones over earlier ones (the layers of an OCI artifact).
type extractor struct {
	dir       string
	root      *os.Root
	limit     int64
	remaining int64
	entries   int
	// whiteouts applies OCI layer whiteout files (.wh.<name>) instead of
	// extracting them.
	whiteouts bool
	// written holds the paths the current archive wrote, so an opaque
	// whiteout clears only what earlier layers left.
	written map[string]bool
	// mapped, when set, puts the current archive's entries back at the
	// source path of a MappedLayer.
	mapped *mapping
	// buf is the files' copy buffer (copyBuffer), made on first use.
	buf []byte
}

func newExtractor(dir string, maxSize int64, whiteouts bool) (*extractor, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return &extractor{dir: dir, root: root, limit: maxSize, remaining: maxSize, whiteouts: whiteouts}, nil
}

func (x *extractor) close() { _ = x.root.Close() }

// trackingReader remembers a read failure of the underlying stream, which
// archive/tar and compress/gzip report in their own words.
type trackingReader struct {
	r   io.Reader
	err error
}

func (t *trackingReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if err != nil && err != io.EOF {
		t.err = err
	}
	return n, err
}

// formatError tells a broken stream from a broken archive.
func formatError(src *trackingReader, err error) error {
	if src.err != nil {
		return &readError{src.err}
	}
	return fault.Permanent(fmt.Errorf("not a valid tar archive: %w", err))
}

// add extracts one archive.
func (x *extractor) add(r io.Reader) error {
	src := &trackingReader{r: r}
	br := bufio.NewReader(src)
	var in io.Reader = br
	if magic, err := br.Peek(2); err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return formatError(src, err)
		}
		defer func() { _ = zr.Close() }()
		in = zr
	}
	x.written = map[string]bool{}
	tr := tar.NewReader(in)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return formatError(src, err)
		}
		if err := x.entry(hdr, tr); err != nil {
			if src.err != nil {
				return &readError{src.err}
			}
			return err
		}
	}
}

// cleanName turns an entry name into a path relative to the root, or
// refuses it. Names are slash-separated in tar whatever the platform.
func cleanName(name string) (string, error) {
	if strings.HasPrefix(name, "/") || filepath.IsAbs(name) {
		return "", unsafeContent("entry %q has an absolute path", name)
	}
	clean := path.Clean(name)
	if clean == "." {
		return clean, nil
	}
	if !filepath.IsLocal(clean) {
		return "", unsafeContent("entry %q points outside the target directory", name)
	}
	return filepath.FromSlash(clean), nil
}

func (x *extractor) entry(hdr *tar.Header, tr *tar.Reader) error {
	name, err := cleanName(hdr.Name)
	if err != nil {
		return err
	}
	if hdr.Typeflag == tar.TypeXGlobalHeader {
		return nil
	}
	if x.mapped != nil {
		var skip bool
		if name, skip, err = x.mappedName(hdr, name); err != nil || skip {
			return err
		}
	}
	if name == "." {
		// The root itself: nothing to create, and its mode is ours.
		return nil
	}
	x.entries++
	if x.entries > maxEntries {
		return unsafeContent("more than %d entries", maxEntries)
	}
	if x.whiteouts {
		base := filepath.Base(name)
		parent := filepath.Dir(name)
		switch {
		case base == ".wh..wh..opq":
			return x.opaque(parent)
		case strings.HasPrefix(base, ".wh."):
			victim := strings.TrimPrefix(base, ".wh.")
			if victim == "" || victim == "." || victim == ".." {
				return unsafeContent("whiteout %q names no entry", hdr.Name)
			}
			return x.root.RemoveAll(filepath.Join(parent, victim))
		}
	}

	switch hdr.Typeflag {
	case tar.TypeDir:
		return x.mkdirAll(name)
	case tar.TypeReg:
		return x.file(name, hdr, tr)
	case tar.TypeSymlink:
		return x.symlink(name, hdr.Linkname)
	case tar.TypeLink:
		return x.hardlink(name, hdr.Linkname)
	case tar.TypeChar, tar.TypeBlock:
		return unsafeContent("entry %q is a device file", hdr.Name)
	case tar.TypeFifo:
		return unsafeContent("entry %q is a fifo", hdr.Name)
	default:
		return unsafeContent("entry %q has unsupported type %q", hdr.Name, hdr.Typeflag)
	}
}

// mappedName is where an entry of a mapped layer goes in the source; skip
// is true for the image's parent directories above the mapped path. Such a
// layer is written by devloop's own image code, which writes no hard links
// and no whiteouts: anything of the kind is refused.
func (x *extractor) mappedName(hdr *tar.Header, name string) (string, bool, error) {
	if hdr.Typeflag == tar.TypeLink {
		return "", false, unsafeContent("mapped layer for %q holds a hard link %q", x.mapped.from, hdr.Name)
	}
	if strings.HasPrefix(filepath.Base(name), ".wh.") {
		return "", false, unsafeContent("mapped layer for %q holds a whiteout %q", x.mapped.from, hdr.Name)
	}
	out, skip, err := x.mapped.rename(filepath.ToSlash(name), hdr.Typeflag == tar.TypeDir)
	if err != nil || skip {
		return "", skip, err
	}
	return filepath.FromSlash(out), false, nil
}

// prepare makes name's parent directories and removes what an earlier
// entry or layer left at name, so the new entry replaces it instead of
// being written through it (a file opened over a symlink follows it).
func (x *extractor) prepare(name string) error {
	if err := x.mkdirAll(filepath.Dir(name)); err != nil {
		return err
	}
	if _, err := x.root.Lstat(name); err == nil {
		if err := x.root.RemoveAll(name); err != nil {
			return err
		}
	}
	x.written[name] = true
	return nil
}

// mkdirAll creates a directory and its parents, recording them as written
// by the current archive. Whatever stands in the way (a file, a symlink
// from an earlier entry) is replaced rather than followed.
func (x *extractor) mkdirAll(dir string) error {
	if dir == "." {
		return nil
	}
	// Parents first: a check of dir itself would look through a symlinked
	// parent that is about to be replaced.
	if err := x.mkdirAll(filepath.Dir(dir)); err != nil {
		return err
	}
	x.written[dir] = true
	fi, err := x.root.Lstat(dir)
	if err == nil && fi.IsDir() {
		return nil
	}
	if err == nil {
		if err := x.root.RemoveAll(dir); err != nil {
			return err
		}
	}
	return x.root.Mkdir(dir, 0o755)
}

// fileMode keeps only what matters to a build: executable or not. Other
// bits (setuid, world-writable) have no business in a shared store.
func fileMode(m fs.FileMode) fs.FileMode {
	if m&0o111 != 0 {
		return 0o755
	}
	return 0o644
}

func (x *extractor) file(name string, hdr *tar.Header, tr *tar.Reader) error {
	if hdr.Size > x.remaining {
		return tooLarge(x.limit)
	}
	if err := x.prepare(name); err != nil {
		return err
	}
	f, err := x.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fileMode(fs.FileMode(hdr.Mode)))
	if err != nil {
		return err
	}
	// Count what is written, not what the header says: the header is the
	// attacker's claim.
	if x.buf == nil {
		x.buf = make([]byte, copyBuffer)
	}
	n, err := io.CopyBuffer(writerOnly{f}, io.LimitReader(tr, x.remaining+1), x.buf)
	x.remaining -= n
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if x.remaining < 0 {
		return tooLarge(x.limit)
	}
	return nil
}

// copyBuffer is the size of the reads and writes a file's content is
// copied with. An *os.File's own ReadFrom copies 32 KiB at a time: a
// syscall each way per 32 KiB was a third of a pushed binary's fetch.
const copyBuffer = 256 << 10

// writerOnly hides a writer's ReadFrom, so io.CopyBuffer uses its buffer.
type writerOnly struct{ io.Writer }

// symlink refuses targets that are absolute or lexically leave the root
// right away; targets that escape through other symlinks are caught by
// finish, once the whole tree is known.
func (x *extractor) symlink(name, target string) error {
	if target == "" || strings.HasPrefix(target, "/") || filepath.IsAbs(target) {
		return unsafeContent("symlink %q has absolute target %q", filepath.ToSlash(name), target)
	}
	if !filepath.IsLocal(filepath.Join(filepath.Dir(name), filepath.FromSlash(target))) {
		return unsafeContent("symlink %q points outside the target directory (%q)", filepath.ToSlash(name), target)
	}
	if err := x.prepare(name); err != nil {
		return err
	}
	return x.root.Symlink(filepath.FromSlash(target), name)
}

func (x *extractor) hardlink(name, target string) error {
	old, err := cleanName(target)
	if err != nil || old == "." {
		return unsafeContent("hard link %q points outside the target directory (%q)", filepath.ToSlash(name), target)
	}
	fi, err := x.root.Lstat(old)
	if err != nil || !fi.Mode().IsRegular() {
		return unsafeContent("hard link %q points to %q, which is not a regular file of the archive", filepath.ToSlash(name), target)
	}
	if old == name {
		return nil
	}
	// A link costs as much as a copy: every walk of the tree (the digest,
	// a build's layer, the store's accounting) reads it again. A million
	// links to one big file must not pass as free.
	if fi.Size() > x.remaining {
		return tooLarge(x.limit)
	}
	x.remaining -= fi.Size()
	if err := x.prepare(name); err != nil {
		return err
	}
	return x.root.Link(old, name)
}

// opaque applies an opaque whiteout: under dir, only what the current
// layer wrote survives.
func (x *extractor) opaque(dir string) error {
	if err := x.mkdirAll(dir); err != nil {
		return err
	}
	return x.clearUnwritten(dir)
}

func (x *extractor) clearUnwritten(dir string) error {
	d, err := x.root.Open(dir)
	if err != nil {
		return err
	}
	entries, err := d.ReadDir(-1)
	_ = d.Close()
	if err != nil {
		return err
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		switch {
		case !x.written[p]:
			if err := x.root.RemoveAll(p); err != nil {
				return err
			}
		case e.IsDir():
			if err := x.clearUnwritten(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// finish checks the tree as a whole, now that no later entry can change
// what a symlink resolves to.
func (x *extractor) finish() error {
	_, err := walkTree(x.dir, math.MaxInt64, nil)
	return err
}

// TreeDigest is the content digest of a directory tree, "sha256:<hex>":
// a hash over a walk in sorted order of every entry's relative path, type,
// executable bit and content (a symlink's target). Timestamps, owners and
// other mode bits do not count, so the same content checked out twice, or
// by two commits, has the same digest. It refuses trees holding special
// files or symlinks that leave the tree.
func TreeDigest(dir string) (string, error) {
	return treeDigestLimited(dir, math.MaxInt64)
}

func treeDigestLimited(dir string, limit int64) (string, error) {
	h := sha256.New()
	if _, err := walkTree(dir, limit, h); err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// walkTree checks every entry of dir, counts regular file bytes against
// limit and, when h is not nil, feeds the canonical form of the tree to it.
// Each record is self-delimiting (NUL-terminated path, explicit size) so
// two different trees cannot produce the same stream.
func walkTree(dir string, limit int64, h io.Writer) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		slash := filepath.ToSlash(rel)
		switch t := d.Type(); {
		case t.IsDir():
			if h != nil {
				_, _ = fmt.Fprintf(h, "d %s\x00", slash)
			}
		case t&fs.ModeSymlink != 0:
			target, err := checkLink(dir, rel)
			if err != nil {
				return err
			}
			if h != nil {
				_, _ = fmt.Fprintf(h, "l %s\x00%s\x00", slash, target)
			}
		case t.IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			total += info.Size()
			if total > limit {
				return tooLarge(limit)
			}
			if h == nil {
				return nil
			}
			_, _ = fmt.Fprintf(h, "f %o %s\x00%d\x00", fileMode(info.Mode()), slash, info.Size())
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			n, err := io.Copy(h, f)
			_ = f.Close()
			if err != nil {
				return err
			}
			if n != info.Size() {
				return fmt.Errorf("%s changed while hashing", slash)
			}
		default:
			return unsafeContent("%q is a %s, not a file, directory or symlink", slash, t.Type().String())
		}
		return nil
	})
	return total, err
}

// checkLink resolves the symlink at rel (relative to root) the way the
// kernel would, component by component, following other symlinks of the
// tree, and refuses it if it is absolute or ever climbs above root. A
// lexical check alone is not enough: "a -> ." then "b -> a/.." stays inside
// on paper and escapes on disk. Dangling links are allowed; what remains of
// their target is checked lexically. It returns the link's target.
func checkLink(root, rel string) (string, error) {
	target, err := os.Readlink(filepath.Join(root, rel))
	if err != nil {
		return "", err
	}
	slash := filepath.ToSlash(rel)
	if target == "" || filepath.IsAbs(target) || strings.HasPrefix(target, "/") {
		return "", unsafeContent("symlink %q has absolute target %q", slash, target)
	}
	escape := unsafeContent("symlink %q points outside the tree (%q)", slash, target)

	// cur holds real directories only: symlinks are expanded, never kept.
	cur := splitPath(filepath.Dir(rel))
	pending := splitPath(target)
	hops := 0
	for len(pending) > 0 {
		c := pending[0]
		pending = pending[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(cur) == 0 {
				return "", escape
			}
			cur = cur[:len(cur)-1]
			continue
		}
		next := filepath.Join(append([]string{root}, append(cur, c)...)...)
		fi, err := os.Lstat(next)
		switch {
		case err != nil:
			if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
				return "", err
			}
			cur = append(cur, c)
		case fi.Mode()&fs.ModeSymlink != 0:
			hops++
			if hops > maxLinkHops {
				return "", unsafeContent("symlink %q: too many levels of symbolic links", slash)
			}
			t, err := os.Readlink(next)
			if err != nil {
				return "", err
			}
			if t == "" || filepath.IsAbs(t) || strings.HasPrefix(t, "/") {
				return "", escape
			}
			pending = append(splitPath(t), pending...)
		default:
			cur = append(cur, c)
		}
	}
	return target, nil
}

func splitPath(p string) []string {
	p = filepath.ToSlash(p)
	if p == "." || p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// PathDigest is the content digest of one path of a fetched tree, a file
// or a directory (TreeDigest's rules), "sha256:<hex>". rel must stay
// inside root; a path that does not exist is an error naming it.
func PathDigest(root, rel string) (string, error) {
	clean := filepath.Clean(rel)
	if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("path %q leaves the source", rel)
	}
	p := filepath.Join(root, clean)
	info, err := os.Lstat(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("path %q is not in the source", rel)
		}
		return "", err
	}
	switch {
	case info.IsDir():
		return TreeDigest(p)
	case info.Mode().IsRegular():
		h := sha256.New()
		fmt.Fprintf(h, "file %t\n", info.Mode()&0o111 != 0)
		f, err := os.Open(p)
		if err != nil {
			return "", err
		}
		defer f.Close()
		if _, err := io.Copy(h, f); err != nil {
			return "", err
		}
		return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
	}
	return "", fmt.Errorf("path %q is neither a file nor a directory", rel)
}

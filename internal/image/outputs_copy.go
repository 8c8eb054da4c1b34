package image

import (
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"syscall"
)

// entryCost is what each entry counts against MaxOutputBytes beyond its
// content: a tar header and padding, so a million empty files cannot
// make a huge artifact either.
const entryCost = 1024

// copyOutput copies the output directory out.Path of the workspace dir
// into dest, keeping names, permission bits and symbolic links, and
// refusing what could not be deployed as a source: a path that is missing
// or not a directory, a symbolic link leaving the output directory, a
// device or pipe, more than MaxOutputBytes. Every read goes through an
// os.Root of the output directory, so no link is followed out of it.
func copyOutput(dir string, out OutputSpec, dest string) error {
	p := path.Clean(out.Path)
	if !filepath.IsLocal(p) {
		return outputError(out, "path %q is not inside the workspace", out.Path)
	}
	ws, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer ws.Close()
	info, err := ws.Stat(p)
	switch {
	case isMissing(err):
		return outputError(out, "directory %s does not exist in the workspace after the run step (did the build command write it?)", out.Path)
	case err != nil:
		// An os.Root refuses a path that leaves it through a link.
		return outputError(out, "%s: %v (an output must be a directory of the workspace, not a link out of it)", out.Path, err)
	case !info.IsDir():
		return outputError(out, "%s is not a directory", out.Path)
	}
	root, err := ws.OpenRoot(p)
	if err != nil {
		return outputError(out, "%s: %v", out.Path, err)
	}
	defer root.Close()

	c := outputCopy{out: out, root: root, dest: dest, budget: outputLimit}
	if err := fs.WalkDir(root.FS(), ".", c.entry); err != nil {
		return err
	}
	// Directories get their modes last, deepest first, so a read-only
	// directory is still written into while its children are copied.
	for _, d := range slices.Backward(c.dirs) {
		if err := os.Chmod(filepath.Join(dest, d.rel), d.mode); err != nil {
			return err
		}
	}
	return nil
}

// outputCopy is one copyOutput in progress.
type outputCopy struct {
	out    OutputSpec
	root   *os.Root
	dest   string
	budget int64
	dirs   []outputDir
}

type outputDir struct {
	rel  string
	mode fs.FileMode
}

func (c *outputCopy) entry(rel string, d fs.DirEntry, err error) error {
	if err != nil {
		return outputError(c.out, "reading %s: %v", path.Join(c.out.Path, rel), err)
	}
	if rel == "." {
		return nil
	}
	if c.budget -= entryCost; c.budget < 0 {
		return c.tooLarge()
	}
	target := filepath.Join(c.dest, filepath.FromSlash(rel))
	info, err := d.Info()
	if err != nil {
		return outputError(c.out, "reading %s: %v", path.Join(c.out.Path, rel), err)
	}
	switch mode := info.Mode(); {
	case mode.IsDir():
		c.dirs = append(c.dirs, outputDir{rel: rel, mode: mode.Perm()})
		return os.Mkdir(target, 0o700)
	case mode&fs.ModeSymlink != 0:
		return c.link(rel, target)
	case mode.IsRegular():
		return c.file(rel, target)
	default:
		return outputError(c.out, "%s is neither a file, a directory nor a symbolic link", path.Join(c.out.Path, rel))
	}
}

// link copies a symbolic link that stays inside the output directory.
func (c *outputCopy) link(rel, target string) error {
	link, err := c.root.Readlink(rel)
	if err != nil {
		return outputError(c.out, "reading link %s: %v", path.Join(c.out.Path, rel), err)
	}
	resolved := path.Join(path.Dir(rel), filepath.ToSlash(link))
	if path.IsAbs(filepath.ToSlash(link)) || !filepath.IsLocal(resolved) {
		return outputError(c.out, "%s is a symbolic link to %s, outside the output directory %s: write a copy of what it points to instead",
			path.Join(c.out.Path, rel), link, c.out.Path)
	}
	return os.Symlink(link, target)
}

// file copies a regular file. It is opened without blocking and checked
// again once open: the build may have replaced it with a pipe since.
func (c *outputCopy) file(rel, target string) error {
	f, err := c.root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return outputError(c.out, "reading %s: %v", path.Join(c.out.Path, rel), err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return outputError(c.out, "%s is neither a file, a directory nor a symbolic link", path.Join(c.out.Path, rel))
	}
	w, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	n, err := io.Copy(w, io.LimitReader(f, c.budget+1))
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if c.budget -= n; c.budget < 0 {
		return c.tooLarge()
	}
	return os.Chmod(target, info.Mode().Perm())
}

func (c *outputCopy) tooLarge() error {
	return outputError(c.out, "%s holds more than %d KiB: an output is for manifests and charts; ship binaries as image layers",
		c.out.Path, outputLimit>>10)
}

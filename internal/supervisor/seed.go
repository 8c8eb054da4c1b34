package supervisor

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// seed fills a fresh live root from the image's originals: for every file
// under orig, a symlink at root/<same path> to it, and the directories
// between. The image's live paths are symlinks into root, so before any
// sync they resolve to the image's own files; a sync then replaces single
// links with files (or deletes them) without copying the rest. Entries
// already in root are kept: a container restarted before any sync finds
// its links there. An image without orig (nothing to seed) is fine.
func seed(root, orig string) (int, error) {
	n := 0
	err := filepath.WalkDir(orig, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == orig && errors.Is(err, fs.ErrNotExist) {
				return filepath.SkipDir
			}
			return err
		}
		rel, err := filepath.Rel(orig, p)
		if err != nil || rel == "." {
			return err
		}
		target := filepath.Join(root, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if _, err := os.Lstat(target); err == nil {
			return nil
		}
		n++
		return os.Symlink(p, target)
	})
	return n, err
}

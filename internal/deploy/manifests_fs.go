package deploy

import (
	"errors"
	"fmt"
	"path/filepath"

	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// rootedFS is the disk as krusty sees it: only root and what is below it
// (after resolving symlinks) can be read, and nothing can be written, so a
// kustomization cannot pull in files from elsewhere on the operator's disk
// (service account tokens, other tenants' sources).
type rootedFS struct {
	filesys.FileSystem
	root string
}

var errReadOnly = errors.New("the source is read-only")

func newRootedFS(root string) *rootedFS {
	return &rootedFS{FileSystem: filesys.MakeFsOnDisk(), root: root}
}

// check refuses a path outside root. A path that does not exist passes when
// its parent is inside, so "not found" errors stay krusty's own.
func (fs *rootedFS) check(path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	for p := abs; ; p = filepath.Dir(p) {
		_, err := insideRoot(fs.root, p)
		if err == nil {
			return nil
		}
		if !errors.Is(err, errNotInSource) || p == filepath.Dir(p) {
			rel, _ := filepath.Rel(fs.root, abs)
			return fmt.Errorf("%s leaves the source", rel)
		}
	}
}

func (fs *rootedFS) Create(string) (filesys.File, error) { return nil, errReadOnly }
func (fs *rootedFS) Mkdir(string) error                  { return errReadOnly }
func (fs *rootedFS) MkdirAll(string) error               { return errReadOnly }
func (fs *rootedFS) RemoveAll(string) error              { return errReadOnly }
func (fs *rootedFS) WriteFile(string, []byte) error      { return errReadOnly }

func (fs *rootedFS) Open(path string) (filesys.File, error) {
	if err := fs.check(path); err != nil {
		return nil, err
	}
	return fs.FileSystem.Open(path)
}

func (fs *rootedFS) IsDir(path string) bool {
	return fs.check(path) == nil && fs.FileSystem.IsDir(path)
}

func (fs *rootedFS) Exists(path string) bool {
	return fs.check(path) == nil && fs.FileSystem.Exists(path)
}

func (fs *rootedFS) ReadDir(path string) ([]string, error) {
	if err := fs.check(path); err != nil {
		return nil, err
	}
	return fs.FileSystem.ReadDir(path)
}

func (fs *rootedFS) CleanedAbs(path string) (filesys.ConfirmedDir, string, error) {
	if err := fs.check(path); err != nil {
		return "", "", err
	}
	return fs.FileSystem.CleanedAbs(path)
}

func (fs *rootedFS) ReadFile(path string) ([]byte, error) {
	if err := fs.check(path); err != nil {
		return nil, err
	}
	return fs.FileSystem.ReadFile(path)
}

func (fs *rootedFS) Glob(pattern string) ([]string, error) {
	matches, err := fs.FileSystem.Glob(pattern)
	if err != nil {
		return nil, err
	}
	var inside []string
	for _, m := range matches {
		if fs.check(m) == nil {
			inside = append(inside, m)
		}
	}
	return inside, nil
}

func (fs *rootedFS) Walk(path string, walkFn filepath.WalkFunc) error {
	if err := fs.check(path); err != nil {
		return err
	}
	return fs.FileSystem.Walk(path, walkFn)
}

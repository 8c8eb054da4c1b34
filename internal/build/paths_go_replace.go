package build

import (
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/mod/modfile"
)

// goModule is a module whose packages are in the source: its path and
// its directory, relative to the source's root.
type goModule struct{ path, dir string }

// localReplaces are the modules the go.mod in modDir replaces with a
// directory of the same source, as Volcano develops its API module in
// staging/ (`volcano.sh/apis => ./staging/src/volcano.sh/apis`): the go
// command compiles them from there, so an edit there must rebuild. A
// replace by a module version, or by a directory outside the source, is
// not in the source. A go.mod that does not parse has none: the build
// reports it.
func localReplaces(root, modDir string) []goModule {
	name := path.Join(modDir, "go.mod")
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
	if err != nil {
		return nil
	}
	f, err := modfile.Parse(name, data, nil)
	if err != nil {
		return nil
	}
	var mods []goModule
	for _, r := range f.Replace {
		to := r.New.Path
		if r.New.Version != "" || !(strings.HasPrefix(to, "./") || strings.HasPrefix(to, "../")) {
			continue
		}
		dir := path.Join(modDir, to)
		if dir == ".." || strings.HasPrefix(dir, "../") {
			continue // outside the source
		}
		mods = append(mods, goModule{path: r.Old.Path, dir: dir})
	}
	return mods
}

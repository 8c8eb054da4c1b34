package build

import (
	"bufio"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// goPrefix marks an images[].paths entry that names a Go package rather
// than files: "go:cmd/scheduler" selects what that package's build reads
// from the source — the package and every package it imports, directly or
// not, that lives in its module or the module's vendor directory (all
// files directly in each of their directories but tests), with go.mod,
// go.sum and vendor/modules.txt. A Go binary's image then rebuilds for
// exactly the packages compiled into it, however many top-level
// directories they span (Volcano's scheduler imports 9 to 15). Imports
// are read from every Go file whatever its build tags, so the selection
// may be larger than one platform's build, never smaller.
const goPrefix = "go:"

// goPackageFiles are the files "go:<dir>" selects in the tree at root,
// as slash paths relative to root.
func goPackageFiles(root, dir string) (map[string]bool, error) {
	dir = path.Clean(dir)
	modDir, modPath, err := findModule(root, dir)
	if err != nil {
		return nil, err
	}
	files := map[string]bool{}
	for _, f := range []string{"go.mod", "go.sum", "vendor/modules.txt"} {
		rel := path.Join(modDir, f)
		if info, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel))); err == nil && info.Mode().IsRegular() {
			files[rel] = true
		}
	}
	mods := append([]goModule{{path: modPath, dir: modDir}}, localReplaces(root, modDir)...)
	for _, m := range mods[1:] {
		rel := path.Join(m.dir, "go.mod")
		if info, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel))); err == nil && info.Mode().IsRegular() {
			files[rel] = true
		}
	}
	seen := map[string]bool{}
	queue := []string{dir}
	for len(queue) > 0 {
		pkg := queue[0]
		queue = queue[1:]
		if seen[pkg] {
			continue
		}
		seen[pkg] = true
		imports, names, err := readPackage(root, pkg)
		if err != nil {
			return nil, err
		}
		if pkg == dir && len(imports) == 0 && !hasGoFile(names) {
			return nil, fmt.Errorf("%q has no Go package", dir)
		}
		for _, n := range names {
			files[path.Join(pkg, n)] = true
		}
		for _, imp := range imports {
			if d, ok := importDir(root, mods, imp); ok && !seen[d] {
				queue = append(queue, d)
			}
		}
	}
	return files, nil
}

// findModule is the directory of the go.mod nearest above dir (dir
// included, root at most) and its module path.
func findModule(root, dir string) (modDir, modPath string, err error) {
	for d := dir; ; d = path.Dir(d) {
		f, err := os.Open(filepath.Join(root, filepath.FromSlash(d), "go.mod"))
		if err == nil {
			defer f.Close()
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				line := strings.TrimSpace(sc.Text())
				if rest, ok := strings.CutPrefix(line, "module"); ok && (rest == "" || rest[0] == ' ' || rest[0] == '\t') {
					mod := strings.TrimSpace(rest)
					if i := strings.Index(mod, "//"); i >= 0 {
						mod = strings.TrimSpace(mod[:i])
					}
					if unq, err := strconv.Unquote(mod); err == nil {
						mod = unq
					}
					if mod != "" {
						return d, mod, nil
					}
				}
			}
			return "", "", fmt.Errorf("%s has no module line", path.Join(d, "go.mod"))
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", "", err
		}
		if d == "." {
			return "", "", fmt.Errorf("no go.mod in %q or above it in the source", dir)
		}
	}
}

// readPackage lists the files directly in dir the package's build may
// read (all but tests and subdirectories) and the imports of its Go files.
func readPackage(root, dir string) (imports, names []string, err error) {
	entries, err := os.ReadDir(filepath.Join(root, filepath.FromSlash(dir)))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, fmt.Errorf("%q is not in the source", dir)
		}
		return nil, nil, err
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || strings.HasSuffix(name, "_test.go") {
			continue
		}
		names = append(names, name)
		if !strings.HasSuffix(name, ".go") || !e.Type().IsRegular() {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(root, filepath.FromSlash(dir), name), nil, parser.ImportsOnly)
		if err != nil {
			// A file that does not parse fails the build itself; its
			// imports are unknown, so its package is all that is taken.
			continue
		}
		for _, imp := range f.Imports {
			if p, err := strconv.Unquote(imp.Path.Value); err == nil && !slices.Contains(imports, p) {
				imports = append(imports, p)
			}
		}
	}
	return imports, names, nil
}

// importDir is the directory in the source of an import path: in the
// main module, in a module replaced by a directory of the source (the
// longest module path that prefixes it), or in the main module's vendor
// directory; ok is false for the standard library and for modules that
// are not in the source.
func importDir(root string, mods []goModule, imp string) (string, bool) {
	main := mods[0]
	if imp == "C" || !strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") && imp != main.path && !strings.HasPrefix(imp, main.path+"/") {
		return "", false // the standard library, or cgo
	}
	dir := path.Join(main.dir, "vendor", imp)
	best := -1
	for _, m := range mods {
		if (imp == m.path || strings.HasPrefix(imp, m.path+"/")) && len(m.path) > best {
			best = len(m.path)
			dir = path.Join(m.dir, strings.TrimPrefix(strings.TrimPrefix(imp, m.path), "/"))
		}
	}
	if info, err := os.Stat(filepath.Join(root, filepath.FromSlash(dir))); err != nil || !info.IsDir() {
		return "", false
	}
	return dir, true
}

func hasGoFile(names []string) bool {
	for _, n := range names {
		if strings.HasSuffix(n, ".go") {
			return true
		}
	}
	return false
}

// goPackageDirs are the package directories of paths' `go:` entries
// ("./cmd/scheduler"), excluded ones left out.
func goPackageDirs(paths []string) []string {
	var out []string
	for _, p := range paths {
		if dir, ok := strings.CutPrefix(p, goPrefix); ok {
			out = append(out, "./"+path.Clean(dir))
		}
	}
	return out
}

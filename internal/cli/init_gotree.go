package cli

import (
	"bufio"
	"bytes"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// goModule is a go.mod of the tree: its directory (slash-separated,
// relative to the tree, "." for the root), module path and Go version.
type goModule struct {
	Dir       string
	Path      string
	GoVersion string // "1.24" from "go 1.24.0"
}

// goMain is a directory of package main: one binary.
type goMain struct {
	Module *goModule
	Dir    string // relative to the tree
	// Pkg is the package as `go build` is given it from the module's
	// directory (./cmd/manager, or . for a main at the module root).
	Pkg string
	// Binary is the file `go build -o out/` writes: the last element of the
	// package's import path.
	Binary string
	// Name is what the binary is called when matching it to a chart's or a
	// Dockerfile's image: the directory, or the module's last path element
	// for a main at the module root or in a bare cmd/ (kubebuilder's
	// cmd/main.go).
	Name string
}

// skippedDirs are never read: other people's code, generated output, git.
var skippedDirs = map[string]bool{
	".git": true, "vendor": true, "node_modules": true, "testdata": true, "third_party": true,
	".github": true, "_output": true, "bin": true, "dist": true,
}

// nonProductDirs hold mains that are tools, tests or examples, not what a
// team deploys.
var nonProductDirs = map[string]bool{
	"hack": true, "test": true, "tests": true, "e2e": true, "tools": true, "example": true,
	"examples": true, "docs": true, "benchmark": true, "samples": true, "scripts": true, "generate": true,
}

var goVersionLine = regexp.MustCompile(`^go\s+([0-9]+\.[0-9]+)`)

// ignoreConstraint is a build constraint that keeps a file out of every
// build (generators run with go run).
var ignoreConstraint = regexp.MustCompile(`^//(go:build|\s*\+build)\s.*\bignore\b`)

// readGoMod reads the module path and the Go version of a go.mod. It reads
// lines rather than depending on a go.mod parser: only two directives are
// needed.
func readGoMod(file string) (modPath, goVersion string, err error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return "", "", err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if rest, ok := strings.CutPrefix(line, "module "); ok {
			modPath = strings.Trim(strings.TrimSpace(rest), `"`)
		}
		if m := goVersionLine.FindStringSubmatch(line); m != nil {
			goVersion = m[1]
		}
	}
	return modPath, goVersion, sc.Err()
}

// isMainDir says whether dir holds a buildable package main: a non-test Go
// file whose package is main and that no `ignore` build constraint keeps
// out (generators run by go:generate).
func isMainDir(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, n), nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil || f.Name.Name != "main" {
			continue
		}
		ignored := false
		for _, cg := range f.Comments {
			if cg.Pos() > f.Package {
				break
			}
			for _, c := range cg.List {
				if ignoreConstraint.MatchString(c.Text) {
					ignored = true
				}
			}
		}
		if !ignored {
			return true
		}
	}
	return false
}

// mainsOf lists the mains of module m under the tree root, skipping tools,
// tests and examples, and nested modules (they are modules of their own).
func mainsOf(root string, m *goModule, nested map[string]bool) []goMain {
	var mains []goMain
	modDir := filepath.Join(root, filepath.FromSlash(m.Dir))
	_ = filepath.WalkDir(modDir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if p != modDir && (skippedDirs[d.Name()] || nonProductDirs[d.Name()] || strings.HasPrefix(d.Name(), ".") || nested[rel]) {
			return filepath.SkipDir
		}
		if !isMainDir(p) {
			return nil
		}
		inMod, _ := filepath.Rel(modDir, p)
		inMod = filepath.ToSlash(inMod)
		g := goMain{Module: m, Dir: rel, Pkg: "./" + inMod, Binary: path.Base(path.Join(m.Path, inMod)), Name: path.Base(inMod)}
		if inMod == "." {
			g.Pkg = "."
		}
		if inMod == "." || inMod == "cmd" {
			g.Name = path.Base(m.Path)
		}
		mains = append(mains, g)
		return nil
	})
	sort.Slice(mains, func(i, j int) bool { return mains[i].Dir < mains[j].Dir })
	return mains
}

package build

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/internal/memo"
	"github.com/devloop-dev/devloop/internal/source"
)

// sourceInputs is what of the image's source its inputs hash covers: the
// resolved revision, or, for an image that names paths, the content of
// just the files they select, so a change elsewhere in the source does not
// rebuild it. Such an image keeps the revision (and revision tag) it was
// built from until its own files change.
//
// The selection is content-addressed, so it is remembered per artifact
// digest: a reconcile that saw the same artifact before hashes nothing.
func (s *imageBuilds) sourceInputs(ctx context.Context, img *v1alpha1.ImageSpec, ref source.Ref) (string, error) {
	if img.Source == "" || len(img.Paths) == 0 {
		return ref.Key(), nil
	}
	a, err := s.sources.Artifact(ctx, img.Source)
	if err != nil {
		return "", err
	}
	key := memo.Key(s.env.UID, "paths/"+img.Name)
	request := a.Key() + "\x00" + strings.Join(img.Paths, "\x00")
	if last, ok := s.e.recent.Get(key); ok && a.Key() != "" && last.request == request {
		return last.digest, nil
	}
	sel, err := compilePaths(img.Paths)
	if err == nil {
		var d string
		if d, err = sel.digest(a.Dir); err == nil {
			s.e.recent.Put(key, memoEntry{request: request, digest: d})
			return d, nil
		}
	}
	var pe *pathError
	if errors.As(err, &pe) {
		return "", fault.Stalledf(v1alpha1.ReasonBuildFailed,
			"image %s: paths[%d]: %s (source %s at %s)", img.Name, pe.index, pe.msg, img.Source, ref.Revision)
	}
	return "", err
}

// pathSelection is an image's paths compiled. Its semantics, which the
// API's documentation of images[].paths repeats:
//
//   - An entry is a slash-separated pattern anchored at the source's root
//     ("cmd/scheduler", not "**/cmd/scheduler" unless that is meant).
//   - Within one path segment, '*' matches any run of characters but '/',
//     '?' one character, and '[a-z]' a class, as Go's path.Match does.
//   - A segment that is exactly "**" matches zero or more whole segments:
//     "pkg/**/*_test.go" matches pkg/a_test.go and pkg/x/y/b_test.go.
//   - An entry that matches a directory selects everything under it, so a
//     plain directory ("pkg/scheduler") is a prefix.
//   - An entry starting with '!' excludes; for each file the last entry
//     that matches it decides, so an include after an exclude takes a file
//     back. A file no include matches is not selected.
//   - "go:<dir>" names a Go package: it matches the files its build reads
//     from the source (goPackageFiles).
//
// Only files and symlinks count; a directory with nothing selected in it
// changes nothing.
type pathSelection struct {
	rules []pathRule
}

type pathRule struct {
	index    int
	exclude  bool
	pattern  string   // as written, without the '!'
	segments []string // the cleaned pattern's segments; none for the root
	// goDir is the package of a "go:" entry, and set the files it
	// matches in the tree at hand.
	goDir string
	set   map[string]bool
}

// pathError is a fault of one entry of images[].paths.
type pathError struct {
	index int
	msg   string
}

func (e *pathError) Error() string { return fmt.Sprintf("paths[%d]: %s", e.index, e.msg) }

func compilePaths(entries []string) (*pathSelection, error) {
	sel := &pathSelection{}
	for i, entry := range entries {
		r := pathRule{index: i, pattern: entry}
		if rest, ok := strings.CutPrefix(entry, "!"); ok {
			r.exclude, r.pattern = true, rest
		}
		pattern := r.pattern
		if dir, ok := strings.CutPrefix(pattern, goPrefix); ok {
			pattern = dir
		}
		clean := path.Clean(pattern)
		switch {
		case pattern == "":
			return nil, &pathError{i, "empty pattern"}
		case path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../"):
			return nil, &pathError{i, fmt.Sprintf("path %q leaves the source", pattern)}
		}
		if pattern != r.pattern {
			r.goDir = clean
			sel.rules = append(sel.rules, r)
			continue
		}
		if clean != "." {
			r.segments = strings.Split(clean, "/")
		}
		for _, seg := range r.segments {
			if seg == "**" {
				continue
			}
			if _, err := path.Match(seg, ""); err != nil {
				return nil, &pathError{i, fmt.Sprintf("pattern %q is malformed (segment %q)", r.pattern, seg)}
			}
		}
		sel.rules = append(sel.rules, r)
	}
	return sel, nil
}

// matches reports whether the rule selects rel (slash-separated, relative
// to the source's root): the pattern matches rel or one of its parent
// directories.
func (r pathRule) matches(rel []string) bool {
	if r.goDir != "" {
		return r.set[strings.Join(rel, "/")]
	}
	return matchPrefix(r.segments, rel)
}

// matchPrefix matches pat against a leading part of name (so a directory
// selects what is under it), with "**" for zero or more segments.
func matchPrefix(pat, name []string) bool {
	if len(pat) == 0 {
		return true
	}
	if pat[0] == "**" {
		for i := 0; i <= len(name); i++ {
			if matchPrefix(pat[1:], name[i:]) {
				return true
			}
		}
		return false
	}
	if len(name) == 0 {
		return false
	}
	if ok, _ := path.Match(pat[0], name[0]); !ok {
		return false
	}
	return matchPrefix(pat[1:], name[1:])
}

// selected is the verdict of the last rule that matches rel, and the
// index of that rule (-1 when none does).
func (s *pathSelection) selected(rel []string) (bool, int) {
	for i := len(s.rules) - 1; i >= 0; i-- {
		if s.rules[i].matches(rel) {
			return !s.rules[i].exclude, i
		}
	}
	return false, -1
}

// includesAfter reports whether an include rule follows rule i: an
// excluded directory must still be walked when one does.
func (s *pathSelection) includesAfter(i int) bool {
	for _, r := range s.rules[i+1:] {
		if !r.exclude {
			return true
		}
	}
	return false
}

// roots are the directories (or files) the walk starts from: each include
// rule's literal leading segments, with nested ones dropped. Excludes add
// nothing to walk.
func (s *pathSelection) roots() []string {
	var roots []string
	for _, r := range s.rules {
		if r.exclude {
			continue
		}
		if r.goDir != "" {
			for f := range r.set {
				roots = append(roots, f)
			}
			continue
		}
		var lit []string
		for _, seg := range r.segments {
			if seg == "**" || strings.ContainsAny(seg, `*?[\`) {
				break
			}
			lit = append(lit, seg)
		}
		roots = append(roots, strings.Join(lit, "/"))
	}
	slices.Sort(roots)
	roots = slices.Compact(roots)
	var out []string
	for _, r := range roots {
		if len(out) > 0 && under(r, out[len(out)-1]) {
			continue
		}
		out = append(out, r)
	}
	return out
}

// under reports whether rel is dir or inside it ("" is the root).
func under(rel, dir string) bool {
	return dir == "" || rel == dir || strings.HasPrefix(rel, dir+"/")
}

// files lists the selected files of the tree at root, sorted, and checks
// that every include rule matched at least one file: a pattern that
// matches nothing is a typo or a file the source no longer has.
func (s *pathSelection) files(root string) ([]string, error) {
	for i := range s.rules {
		if r := &s.rules[i]; r.goDir != "" {
			set, err := goPackageFiles(root, r.goDir)
			if err != nil {
				return nil, &pathError{i, r.pattern + ": " + err.Error()}
			}
			r.set = set
		}
	}
	matched := make([]bool, len(s.rules))
	var out []string
	for _, start := range s.roots() {
		err := filepath.WalkDir(filepath.Join(root, filepath.FromSlash(start)), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) && p == filepath.Join(root, filepath.FromSlash(start)) {
					return nil // the include that named it reports it below
				}
				return err
			}
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			if rel == "." {
				return nil
			}
			segs := strings.Split(filepath.ToSlash(rel), "/")
			if d.IsDir() {
				// A directory an exclude matches excludes all under it,
				// unless a later include may take something back.
				if ok, i := s.selected(segs); !ok && i >= 0 && !s.includesAfter(i) {
					return filepath.SkipDir
				}
				return nil
			}
			for i, r := range s.rules {
				if !r.exclude && r.matches(segs) {
					matched[i] = true
				}
			}
			if ok, _ := s.selected(segs); ok {
				out = append(out, filepath.ToSlash(rel))
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	for i, r := range s.rules {
		if r.exclude || matched[i] {
			continue
		}
		if strings.ContainsAny(r.pattern, `*?[\`) {
			return nil, &pathError{i, fmt.Sprintf("pattern %q matches no file in the source", r.pattern)}
		}
		return nil, &pathError{i, fmt.Sprintf("path %q is not in the source", r.pattern)}
	}
	slices.Sort(out)
	return out, nil
}

// digest hashes the selected files: for each, its path, whether it is
// executable and its content (a symlink: its target), each record
// self-delimiting so two selections cannot hash alike.
func (s *pathSelection) digest(root string) (string, error) {
	files, err := s.files(root)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, rel := range files {
		p := filepath.Join(root, filepath.FromSlash(rel))
		info, err := os.Lstat(p)
		if err != nil {
			return "", err
		}
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(h, "l %s\x00%s\x00", rel, target)
		case info.Mode().IsRegular():
			fmt.Fprintf(h, "f %t %s\x00%d\x00", info.Mode()&0o111 != 0, rel, info.Size())
			if err := hashFile(h, p, info.Size()); err != nil {
				return "", fmt.Errorf("%s: %w", rel, err)
			}
		}
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

func hashFile(h io.Writer, p string, size int64) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := io.Copy(h, f)
	if err != nil {
		return err
	}
	if n != size {
		return errors.New("changed while hashing")
	}
	return nil
}

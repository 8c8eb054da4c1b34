package cli

import (
	"bufio"
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
)

// DevloopIgnoreFile lists what `push` leaves out beyond .gitignore, in
// .gitignore syntax; its patterns come after .gitignore's, so a "!pattern"
// there can push a file git ignores (a built binary, say).
const DevloopIgnoreFile = ".devloopignore"

// ignoreMatcher says which paths of a pushed directory stay out of the
// artifact: .git always, and what the .gitignore and .devloopignore files in
// the directory and below say, with git's rules (go-git's implementation).
// Ignore files above the directory do not apply: `push ./bin` pushes a
// directory the repository itself ignores.
type ignoreMatcher struct {
	m gitignore.Matcher
}

// loadIgnore reads the ignore files of dir and its subdirectories, skipping
// directories already ignored as git does.
func loadIgnore(dir string) (*ignoreMatcher, error) {
	var patterns []gitignore.Pattern
	m := &ignoreMatcher{}
	read := func(domain []string, file string) error {
		data, err := os.ReadFile(file)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			line := strings.TrimSuffix(sc.Text(), "\r")
			if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
				continue
			}
			patterns = append(patterns, gitignore.ParsePattern(line, domain))
		}
		return sc.Err()
	}
	if err := read(nil, filepath.Join(dir, ".git", "info", "exclude")); err != nil {
		return nil, err
	}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		var domain []string
		if rel != "." {
			domain = strings.Split(filepath.ToSlash(rel), "/")
			m.m = gitignore.NewMatcher(patterns)
			if m.Exclude(filepath.ToSlash(rel), true) {
				return fs.SkipDir
			}
		}
		for _, name := range []string{".gitignore", DevloopIgnoreFile} {
			if err := read(domain, filepath.Join(path, name)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	m.m = gitignore.NewMatcher(patterns)
	return m, nil
}

// Exclude says whether rel (slash-separated, relative to the pushed
// directory) stays out; it is a source.ExcludeFunc.
func (m *ignoreMatcher) Exclude(rel string, isDir bool) bool {
	parts := strings.Split(rel, "/")
	// The repository's own .git, and any nested repository's .git
	// directory (its config may hold credentials in remote URLs); a .git
	// file (a submodule's pointer) deeper down is kept.
	if parts[0] == ".git" || (isDir && parts[len(parts)-1] == ".git") {
		return true
	}
	return m.m != nil && m.m.Match(parts, isDir)
}

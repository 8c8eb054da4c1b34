package cli

import (
	"bufio"
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	gitconfig "github.com/go-git/go-git/v5/plumbing/format/config"
	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
)

// DevloopIgnoreFile lists what `push` leaves out beyond .gitignore, in
// .gitignore syntax; its patterns come after .gitignore's, so a "!pattern"
// there can push a file git ignores (a built binary, say).
const DevloopIgnoreFile = ".devloopignore"

// ignoreMatcher says which paths of a pushed directory stay out of the
// artifact: .git always, and what git would ignore there, with git's rules
// (go-git's implementation): git's global excludes (core.excludesFile,
// by default $XDG_CONFIG_HOME/git/ignore), the repository's
// .git/info/exclude, the .gitignore files from the repository's root down
// to the directory and below it, and the .devloopignore files in the
// directory and below, last. A pattern from above the directory that
// ignores the directory itself (or one of its parents) does not apply:
// `push ./bin` pushes a directory the repository ignores, but a pattern
// such as `*.env` or `sub/.env` in the repository's root still keeps
// ./bin/sub/.env out.
type ignoreMatcher struct {
	m gitignore.Matcher
	// prefix is the pushed directory's path from the repository root;
	// patterns match paths from the root.
	prefix []string
}

// loadIgnore reads the ignore files that apply to dir and its
// subdirectories, skipping directories already ignored as git does.
func loadIgnore(dir string) (*ignoreMatcher, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	root, gitDir := findRepository(abs)
	m := &ignoreMatcher{}
	if rel, err := filepath.Rel(root, abs); err == nil && rel != "." {
		m.prefix = strings.Split(filepath.ToSlash(rel), "/")
	}
	var patterns []gitignore.Pattern
	read := func(domain []string, file string) error {
		ps, err := readPatterns(domain, file)
		patterns = append(patterns, ps...)
		return err
	}

	// From above the pushed directory, in git's order of precedence
	// (later wins): global excludes, info/exclude, .gitignore files from
	// the root down.
	if f := globalExcludesFile(gitDir); f != "" {
		if err := read(nil, f); err != nil {
			return nil, err
		}
	}
	if gitDir != "" {
		if err := read(nil, filepath.Join(gitDir, "info", "exclude")); err != nil {
			return nil, err
		}
	}
	for i := range m.prefix {
		if err := read(m.prefix[:i], filepath.Join(root, filepath.Join(m.prefix[:i]...), ".gitignore")); err != nil {
			return nil, err
		}
	}
	patterns = slices.DeleteFunc(patterns, func(p gitignore.Pattern) bool {
		for k := 1; k <= len(m.prefix); k++ {
			if p.Match(m.prefix[:k], true) == gitignore.Exclude {
				return true
			}
		}
		return false
	})

	err = filepath.WalkDir(abs, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(abs, path)
		if err != nil {
			return err
		}
		domain := slices.Clone(m.prefix)
		if rel != "." {
			domain = append(domain, strings.Split(filepath.ToSlash(rel), "/")...)
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

// readPatterns reads one ignore file; a missing one has no patterns.
func readPatterns(domain []string, file string) ([]gitignore.Pattern, error) {
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var patterns []gitignore.Pattern
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSuffix(sc.Text(), "\r")
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		patterns = append(patterns, gitignore.ParsePattern(line, domain))
	}
	return patterns, sc.Err()
}

// findRepository is the root of the git work tree holding dir and its git
// directory; dir itself and no git directory when dir is in none.
func findRepository(dir string) (root, gitDir string) {
	for d := dir; ; {
		dotGit := filepath.Join(d, ".git")
		if fi, err := os.Stat(dotGit); err == nil {
			if fi.IsDir() {
				return d, dotGit
			}
			// A worktree's or submodule's .git file: "gitdir: <path>";
			// info/exclude lives in the common directory of a worktree.
			if data, err := os.ReadFile(dotGit); err == nil {
				if g, ok := strings.CutPrefix(strings.TrimSpace(string(data)), "gitdir:"); ok {
					g = strings.TrimSpace(g)
					if !filepath.IsAbs(g) {
						g = filepath.Join(d, g)
					}
					if c, err := os.ReadFile(filepath.Join(g, "commondir")); err == nil {
						common := strings.TrimSpace(string(c))
						if !filepath.IsAbs(common) {
							common = filepath.Join(g, common)
						}
						g = common
					}
					return d, g
				}
			}
			return d, ""
		}
		parent := filepath.Dir(d)
		if parent == d {
			return dir, ""
		}
		d = parent
	}
}

// globalExcludesFile is git's core.excludesFile as the user's git
// configuration sets it ($XDG_CONFIG_HOME/git/config, ~/.gitconfig, then
// the repository's config; the last one setting it wins), by default
// $XDG_CONFIG_HOME/git/ignore (~/.config/git/ignore).
func globalExcludesFile(gitDir string) string {
	home, _ := os.UserHomeDir()
	xdg := os.Getenv("XDG_CONFIG_HOME")
	if xdg == "" && home != "" {
		xdg = filepath.Join(home, ".config")
	}
	var configs []string
	if xdg != "" {
		configs = append(configs, filepath.Join(xdg, "git", "config"))
	}
	if home != "" {
		configs = append(configs, filepath.Join(home, ".gitconfig"))
	}
	if gitDir != "" {
		configs = append(configs, filepath.Join(gitDir, "config"))
	}
	file := ""
	for _, c := range configs {
		f, err := os.Open(c)
		if err != nil {
			continue
		}
		cfg := gitconfig.New()
		err = gitconfig.NewDecoder(f).Decode(cfg)
		_ = f.Close()
		if err != nil {
			continue
		}
		if v := cfg.Section("core").Option("excludesFile"); v != "" {
			file = v
		}
	}
	if file == "" {
		if xdg == "" {
			return ""
		}
		return filepath.Join(xdg, "git", "ignore")
	}
	if rest, ok := strings.CutPrefix(file, "~/"); ok && home != "" {
		file = filepath.Join(home, rest)
	}
	return file
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
	return m.m != nil && m.m.Match(append(slices.Clone(m.prefix), parts...), isDir)
}

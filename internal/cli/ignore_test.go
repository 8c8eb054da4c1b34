package cli

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/devloop-dev/devloop/internal/source"
	"github.com/devloop-dev/devloop/internal/testfiles"
)

// packedFiles packs dir with its ignore files and lists the entries.
func packedFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := loadIgnore(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	err = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		rel = filepath.ToSlash(rel)
		if m.Exclude(rel, d.IsDir()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.IsDir() {
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestIgnoreRules(t *testing.T) {
	cases := []struct {
		name  string
		files map[string]string
		want  []string
	}{{
		name: "nothing ignored but .git directories",
		files: map[string]string{"a.go": "", ".git/config": "", "sub/.git": "a file named .git in a subdirectory is kept",
			"vendor/lib/.git/config": "[remote \"origin\"]\n\turl = https://user:token@example.com/lib.git\n", "vendor/lib/lib.go": ""},
		want: []string{"a.go", "sub/.git", "vendor/lib/lib.go"},
	}, {
		name: "gitignore patterns, anchored and not",
		files: map[string]string{
			".gitignore": "# comment\n*.log\n/build/\n",
			"a.log":      "", "sub/b.log": "", "build/out": "", "sub/build/kept": "", "main.go": "",
		},
		want: []string{".gitignore", "main.go", "sub/build/kept"},
	}, {
		name: "devloopignore adds, and can push back what git ignores",
		files: map[string]string{
			".gitignore":     "bin/\n*.tmp\n",
			".devloopignore": "docs/\n!keep.tmp\n",
			"bin/manager":    "", "docs/x.md": "", "a.tmp": "", "keep.tmp": "", "main.go": "",
		},
		want: []string{".devloopignore", ".gitignore", "keep.tmp", "main.go"},
	}, {
		name: "nested ignore files apply below their directory",
		files: map[string]string{
			"web/.gitignore": "dist\n", "web/dist/app.js": "", "web/src/app.ts": "", "dist/kept": "",
			"api/.devloopignore": "*.pb.go\n", "api/x.pb.go": "", "x.pb.go": "",
		},
		want: []string{"api/.devloopignore", "dist/kept", "web/.gitignore", "web/src/app.ts", "x.pb.go"},
	}, {
		name: "git info/exclude",
		files: map[string]string{
			".git/info/exclude": "local-notes.txt\n", "local-notes.txt": "", "main.go": "",
		},
		want: []string{"main.go"},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			testfiles.Write(t, dir, c.files)
			if got := packedFiles(t, dir); !slices.Equal(got, c.want) {
				t.Fatalf("kept %v, want %v", got, c.want)
			}
		})
	}
}

// Ignored files do not change the digest, and neither do modification
// times; a kept file does.
func TestPushDigestStableUnderIgnoredChangesAndTimes(t *testing.T) {
	dir := testfiles.Tree(t, map[string]string{".gitignore": "*.log\n", "main.go": "package main", "run.log": "1"})
	digest := func() string {
		m, err := loadIgnore(dir)
		if err != nil {
			t.Fatal(err)
		}
		img, err := source.PackDir(dir, m.Exclude, source.CompressionGzip)
		if err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d.String()
	}
	first := digest()
	testfiles.Write(t, dir, map[string]string{"run.log": "2, much longer"})
	later := time.Now().Add(2 * time.Hour)
	for _, p := range []string{"main.go", ".gitignore", "."} {
		if err := os.Chtimes(filepath.Join(dir, p), later, later); err != nil {
			t.Fatal(err)
		}
	}
	if d := digest(); d != first {
		t.Fatalf("digest moved with an ignored file or mtimes: %s -> %s", first, d)
	}
	testfiles.Write(t, dir, map[string]string{"main.go": "package main // changed"})
	if d := digest(); d == first {
		t.Fatal("digest did not move with a kept file")
	}
}

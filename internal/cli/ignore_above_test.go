package cli

import (
	"archive/tar"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/source"
	"github.com/devloop-dev/devloop/internal/testfiles"
	"github.com/devloop-dev/devloop/test/builder"
)

// isolateGitConfig points git's user configuration at an empty directory.
func isolateGitConfig(t *testing.T) (home, xdg string) {
	t.Helper()
	home, xdg = t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", xdg)
	return home, xdg
}

// What the repository ignores above the pushed directory, its
// info/exclude and git's global excludes apply to a push of a
// subdirectory; a pattern that ignores the pushed directory itself does
// not empty it.
func TestIgnoreFilesAboveThePushedDirectory(t *testing.T) {
	home, xdg := isolateGitConfig(t)
	repo := testfiles.Tree(t, map[string]string{
		".git/HEAD":         "ref: refs/heads/main\n",
		".git/info/exclude": "notes.txt\n",
		".gitignore":        "*.env\nbin/\n",
		"proj/.gitignore":   "bin/sub/private.key\n",
		// The pushed directory, ignored itself by "bin/" above.
		"proj/bin/manager":         "",
		"proj/bin/keep.txt":        "",
		"proj/bin/sub/.env":        "TOKEN=secret",
		"proj/bin/sub/private.key": "key",
		"proj/bin/notes.txt":       "",
		"proj/bin/x.swp":           "",
		"proj/bin/y.bak":           "",
	})
	testfiles.Write(t, xdg, map[string]string{"git/ignore": "*.swp\n"})
	dir := filepath.Join(repo, "proj", "bin")
	want := []string{"keep.txt", "manager", "y.bak"}
	if got := packedFiles(t, dir); !slices.Equal(got, want) {
		t.Fatalf("kept %v, want %v", got, want)
	}

	// core.excludesFile replaces the default global file.
	testfiles.Write(t, home, map[string]string{".gitconfig": "[core]\n\texcludesfile = ~/my-ignore\n", "my-ignore": "*.bak\n"})
	want = []string{"keep.txt", "manager", "x.swp"}
	if got := packedFiles(t, dir); !slices.Equal(got, want) {
		t.Fatalf("with core.excludesFile: kept %v, want %v", got, want)
	}

	// Pushing from a relative path finds the same repository.
	wd, _ := os.Getwd()
	t.Cleanup(func() { _ = os.Chdir(wd) })
	if err := os.Chdir(filepath.Join(repo, "proj")); err != nil {
		t.Fatal(err)
	}
	if got := packedFiles(t, "bin"); !slices.Equal(got, want) {
		t.Fatalf("relative: kept %v, want %v", got, want)
	}

	// The packed artifact leaves them out too (push and every --watch
	// push pack through PackSource).
	img, err := PackSource(dir, &v1alpha1.DevEnvironment{}, "app", source.CompressionGzip)
	if err != nil {
		t.Fatal(err)
	}
	files := imageFiles(t, img)
	for _, f := range []string{"sub/.env", "sub/private.key", "notes.txt", "y.bak"} {
		if slices.Contains(files, f) {
			t.Errorf("%s was packed: %v", f, files)
		}
	}
}

// A worktree's .git file leads to the repository's info/exclude.
func TestIgnoreInfoExcludeOfAWorktree(t *testing.T) {
	isolateGitConfig(t)
	main := testfiles.Tree(t, map[string]string{".git/info/exclude": "local.txt\n", ".git/worktrees/wt/commondir": "../..\n"})
	wt := testfiles.Tree(t, map[string]string{
		".git":          "gitdir: " + filepath.Join(main, ".git", "worktrees", "wt") + "\n",
		"app/local.txt": "", "app/main.go": "",
	})
	if got := packedFiles(t, filepath.Join(wt, "app")); !slices.Equal(got, []string{"main.go"}) {
		t.Fatalf("kept %v", got)
	}
}

// An absolute symbolic link is refused by the plugin with a message that
// says what to do, whichever way the push packs.
func TestPushRefusesAbsoluteSymlinks(t *testing.T) {
	isolateGitConfig(t)
	dir := testfiles.Tree(t, map[string]string{"main.go": ""})
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "passwd")); err != nil {
		t.Fatal(err)
	}
	// An image copying the link without a run step: a local push lays its
	// layer out before packing.
	env := builder.Env("team", "dev").Components(builder.Component("c",
		builder.Images(builder.Image("i", builder.Layer("passwd", "/passwd"))))).Obj()
	for _, c := range []source.Compression{source.CompressionGzip, source.CompressionNone} {
		_, err := PackSource(dir, env, "app", c)
		if err == nil || !strings.Contains(err.Error(), "passwd is a symbolic link to /etc/passwd") {
			t.Errorf("%s: err %v, want a refusal naming the link", c, err)
		}
	}
}

// imageFiles lists the regular files of an image's layers.
func imageFiles(t *testing.T, img v1.Image) []string {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, l := range layers {
		for _, e := range testfiles.LayerEntries(t, l) {
			if e.Typeflag == tar.TypeReg {
				files = append(files, strings.TrimPrefix(e.Name, "./"))
			}
		}
	}
	return files
}

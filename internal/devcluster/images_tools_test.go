package devcluster

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/devloop-dev/devloop/internal/image"
	"github.com/devloop-dev/devloop/internal/testregistry"
)

// TestBuilderToolsRunFromTheImage is issue 18 item 12: the Go builder
// image carries make and git. The tools' layers, as PushGoImage adds them,
// are pushed to a real registry and read back: the image holds each tool
// and every library ldd lists for it, under the names the loader looks
// for; run from the image's files alone (their loader, their libraries),
// `make --version` and `git --version` work. The same layers built twice
// are the same image.
func TestBuilderToolsRunFromTheImage(t *testing.T) {
	ctx := context.Background()
	for _, tool := range builderTools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed here (hack/cluster/deps.sh installs it)", tool)
		}
	}
	host := testregistry.Start(t)
	layers, err := toolLayers(ctx, builderTools)
	if err != nil {
		t.Fatal(err)
	}
	b, err := image.NewBuilder(image.Registry{Prefix: host + "/devloop", Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	tags := func(string) ([]string, error) { return []string{"dev"}, nil }
	res, err := b.Build(ctx, image.Spec{Name: "tools", Layers: layers}, "/", tags)
	if err != nil {
		t.Fatal(err)
	}
	again, err := b.Build(ctx, image.Spec{Name: "tools", Layers: layers}, "/", tags)
	if err != nil {
		t.Fatal(err)
	}
	if again.Digest != res.Digest {
		t.Errorf("the same tools gave %s, then %s", res.Digest, again.Digest)
	}

	img := testregistry.Pull(t, res.Repository+"@"+res.Digest)
	root := t.TempDir()
	files := extract(t, mutate.Extract(img), root)

	var want []string
	for _, tool := range builderTools {
		want = append(want, strings.TrimPrefix(tool, "/"))
		libs, err := sharedLibraries(ctx, tool)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range libs {
			want = append(want, strings.TrimPrefix(l, "/"))
		}
	}
	var loader string
	var libDirs []string
	for _, f := range want {
		if !slices.Contains(files, f) {
			t.Errorf("the image has no %s; it has %v", f, files)
		}
		switch {
		case strings.Contains(f, "/ld-linux"):
			loader = filepath.Join(root, f)
		case strings.Contains(f, ".so"):
			if d := filepath.Join(root, filepath.Dir(f)); !slices.Contains(libDirs, d) {
				libDirs = append(libDirs, d)
			}
		}
	}
	if loader == "" {
		t.Fatalf("no dynamic loader among %v", want)
	}
	for tool, says := range map[string]string{"usr/bin/make": "GNU Make", "usr/bin/git": "git version"} {
		// The image's loader, told to look only in the image's library
		// directories, runs the image's binary.
		out, err := exec.Command(loader, "--inhibit-cache", "--library-path", strings.Join(libDirs, ":"),
			filepath.Join(root, tool), "--version").CombinedOutput()
		if err != nil || !strings.Contains(string(out), says) {
			t.Errorf("%s --version from the image: %v\n%s", tool, err, out)
		}
	}
}

// extract writes the regular files of a flattened image under root and
// returns their paths.
func extract(t *testing.T, rc io.ReadCloser, root string) []string {
	t.Helper()
	defer rc.Close()
	var files []string
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Typeflag != tar.TypeReg || !filepath.IsLocal(hdr.Name) {
			continue
		}
		p := filepath.Join(root, hdr.Name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(hdr.Mode)&0o777)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(f, tr); err != nil {
			t.Fatal(err)
		}
		f.Close()
		files = append(files, hdr.Name)
	}
}

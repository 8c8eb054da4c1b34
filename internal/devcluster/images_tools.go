package devcluster

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// builderTools are what real projects' Makefiles call and busybox lacks
// (Volcano's `make vc-scheduler` runs git for its version ldflags). They
// are this machine's Debian binaries (hack/cluster/deps.sh installs them),
// copied into GoImage with their shared libraries and the dynamic loader.
var builderTools = []string{"/usr/bin/make", "/usr/bin/git"}

// toolLayers maps each tool and its shared-library closure, as ldd lists
// it, into layers at the paths the loader looks them up by, one layer a
// file in path order, so the image is the same on every run. Symlinks
// (merged /usr, a library's soname) are resolved on this machine and the
// file is copied under the name ldd gave. From is relative to "/".
func toolLayers(ctx context.Context, tools []string) ([]v1alpha1.LayerMapping, error) {
	files := map[string]bool{}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%s is not on this machine (hack/cluster/deps.sh installs it): %w", tool, err)
		}
		files[tool] = true
		libs, err := sharedLibraries(ctx, tool)
		if err != nil {
			return nil, err
		}
		for _, l := range libs {
			files[l] = true
		}
	}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	layers := make([]v1alpha1.LayerMapping, 0, len(paths))
	for _, p := range paths {
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return nil, err
		}
		layers = append(layers, v1alpha1.LayerMapping{From: strings.TrimPrefix(real, "/"), To: p})
	}
	return layers, nil
}

// sharedLibraries are the absolute paths ldd lists for a binary: its
// libraries and the dynamic loader (the kernel's vDSO has no file).
func sharedLibraries(ctx context.Context, binary string) ([]string, error) {
	out, err := exec.CommandContext(ctx, "ldd", binary).Output()
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %w", binary, err)
	}
	var libs []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		// "libz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x...)" or
		// "/lib64/ld-linux-x86-64.so.2 (0x...)".
		line := strings.TrimSpace(sc.Text())
		if _, after, ok := strings.Cut(line, "=>"); ok {
			line = strings.TrimSpace(after)
		}
		path, _, _ := strings.Cut(line, " ")
		if strings.HasPrefix(path, "/") {
			libs = append(libs, path)
		}
	}
	if len(libs) == 0 {
		return nil, fmt.Errorf("ldd %s listed no libraries: %q", binary, out)
	}
	return libs, nil
}

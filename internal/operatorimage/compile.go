package operatorimage

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// GoBuildFlags are the flags the manager is compiled with, here and in the
// Dockerfile (a test keeps the two equal): no cgo (a static binary for a
// base without libc), no local paths, no symbol tables.
var GoBuildFlags = []string{"-trimpath", "-ldflags", "-s -w"}

// Compile builds ./cmd/manager of the module at root for each platform
// into outDir/<os>-<arch>/manager, and the live update supervisor
// (./cmd/supervisor) next to it, and returns the Binaries and Supervisors
// of Options. Go's build cache makes a second run with nothing changed
// take seconds.
func Compile(ctx context.Context, root, outDir string, platforms []string) (managers, supervisors map[string]string, err error) {
	managers, supervisors = map[string]string{}, map[string]string{}
	for _, platform := range platforms {
		goos, goarch, ok := strings.Cut(platform, "/")
		if !ok || strings.Contains(goarch, "/") {
			return nil, nil, fmt.Errorf("platform %q is not os/arch", platform)
		}
		for _, b := range []struct {
			pkg string
			out map[string]string
		}{{"./cmd/manager", managers}, {"./cmd/supervisor", supervisors}} {
			bin := filepath.Join(outDir, goos+"-"+goarch, filepath.Base(b.pkg))
			args := append([]string{"build", "-o", bin}, GoBuildFlags...)
			cmd := exec.CommandContext(ctx, "go", append(args, b.pkg)...)
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
			if out, err := cmd.CombinedOutput(); err != nil {
				return nil, nil, fmt.Errorf("go build %s for %s: %v\n%s", b.pkg, platform, err, out)
			}
			b.out[platform] = bin
		}
	}
	return managers, supervisors, nil
}

package operatorimage

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/devloop-dev/devloop/internal/message"
)

// GoBuildFlags are the flags the manager is compiled with, here and in the
// Dockerfile (a test keeps the two equal): no cgo (a static binary for a
// base without libc), no local paths, no symbol tables.
var GoBuildFlags = []string{"-trimpath", "-ldflags", "-s -w"}

// LocalBuildFlags are the flags of an image for a local cluster: without
// -trimpath, which changes every package's build cache key, the manager
// is linked from the packages `go test` and `go vet` already compiled.
var LocalBuildFlags = []string{"-ldflags", "-s -w"}

// Compilation is what Compile builds, and how.
type Compilation struct {
	// Root is the devloop module's directory.
	Root string
	// OutDir receives <os>-<arch>/manager and <os>-<arch>/supervisor.
	OutDir    string
	Platforms []string
	// Flags are go build's flags: GoBuildFlags when nil.
	Flags []string
	// Progress, when set, receives a line per package go build compiles
	// (go build -v): how far a cold build has got.
	Progress io.Writer
}

// Compile builds ./cmd/manager of the module at c.Root for each platform
// into OutDir/<os>-<arch>/manager, and the live update supervisor
// (./cmd/supervisor) next to it, and returns the Binaries and Supervisors
// of Options. Go's build cache makes a second run with nothing changed
// take seconds.
func Compile(ctx context.Context, c Compilation) (managers, supervisors map[string]string, err error) {
	flags := c.Flags
	if flags == nil {
		flags = GoBuildFlags
	}
	if c.Progress != nil {
		flags = append([]string{"-v"}, flags...)
	}
	root, outDir := c.Root, c.OutDir
	managers, supervisors = map[string]string{}, map[string]string{}
	for _, platform := range c.Platforms {
		goos, goarch, ok := strings.Cut(platform, "/")
		if !ok || strings.Contains(goarch, "/") {
			return nil, nil, fmt.Errorf("platform %q is not os/arch", platform)
		}
		for _, b := range []struct {
			pkg string
			out map[string]string
		}{{"./cmd/manager", managers}, {"./cmd/supervisor", supervisors}} {
			bin := filepath.Join(outDir, goos+"-"+goarch, filepath.Base(b.pkg))
			args := append([]string{"build", "-o", bin}, flags...)
			cmd := exec.CommandContext(ctx, "go", append(args, b.pkg)...)
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
			out := &message.Tail{Max: 16 << 10} // go build's errors, not the -v package list before them
			cmd.Stdout, cmd.Stderr = out, out
			if c.Progress != nil {
				cmd.Stderr = io.MultiWriter(out, c.Progress)
			}
			if err := cmd.Run(); err != nil {
				return nil, nil, fmt.Errorf("go build %s for %s: %v\n%s", b.pkg, platform, err, out.String())
			}
			b.out[platform] = bin
		}
	}
	return managers, supervisors, nil
}

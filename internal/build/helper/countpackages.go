package helper

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/devloop-dev/devloop/internal/build"
)

// countPackages prints, before a warm build's command runs, how many Go
// packages the image's binaries need (`go list -deps` of the image's
// `go:` paths, the standard library's included): on a cold cache that is
// how many the build compiles, so the component's message can say "302
// of 1180 packages compiled" instead of a count with no end (a cold
// compile of a real tree is tens of minutes). It is counted once per
// build, before the compile, in the build's own environment (GOFLAGS'
// -mod, GOPROXY); a tree go list cannot read prints nothing and the
// build runs as before. Packages are grouped by the module that holds
// them (a module in a subdirectory is listed from there).
func countPackages(ctx context.Context, dir string, pkgs []string, env []string, log io.Writer, out io.Writer) {
	byModule := map[string][]string{}
	var order []string
	for _, p := range pkgs {
		mod, rel, ok := moduleOf(dir, p)
		if !ok {
			fmt.Fprintf(log, "counting packages: no go.mod holds %s\n", p)
			return
		}
		if _, seen := byModule[mod]; !seen {
			order = append(order, mod)
		}
		byModule[mod] = append(byModule[mod], rel)
	}
	seen := map[string]bool{}
	for _, mod := range order {
		args := append([]string{"list", "-deps", "-f", "{{.ImportPath}}"}, byModule[mod]...)
		cmd := exec.CommandContext(ctx, "go", args...)
		var stdout bytes.Buffer
		cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = filepath.Join(dir, mod), listEnv(env), &stdout, log
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(log, "counting packages: go %s in %s: %v\n", strings.Join(args, " "), mod, err)
			return
		}
		for _, line := range strings.Split(stdout.String(), "\n") {
			if line = strings.TrimSpace(line); line != "" {
				seen[line] = true
			}
		}
	}
	if len(seen) > 0 {
		fmt.Fprintf(out, "%s %d %s\n", build.PackagesTotalPrefix, len(seen), build.PackagesTotalSuffix)
	}
}

// listEnv is the build's environment for go list, without -v in GOFLAGS:
// go list prints nothing more with it, but the flag is the build's.
func listEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "GOFLAGS="); ok {
			var kept []string
			for _, f := range strings.Fields(v) {
				if f != "-v" {
					kept = append(kept, f)
				}
			}
			e = "GOFLAGS=" + strings.Join(kept, " ")
		}
		out = append(out, e)
	}
	return out
}

// moduleOf is the directory (relative to root) of the nearest go.mod
// above the package directory p, and p as a package pattern from there.
func moduleOf(root, p string) (mod, rel string, ok bool) {
	d := filepath.Clean(filepath.FromSlash(strings.TrimPrefix(p, "./")))
	for at := d; ; at = filepath.Dir(at) {
		if _, err := os.Stat(filepath.Join(root, at, "go.mod")); err == nil {
			r, err := filepath.Rel(at, d)
			if err != nil {
				return "", "", false
			}
			return at, "./" + filepath.ToSlash(r), true
		}
		if at == "." || at == string(filepath.Separator) {
			return "", "", false
		}
	}
}

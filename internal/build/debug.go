package build

import (
	"strings"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// DebugGCFlags turns the compiler's optimizations and inlining off in
// every package, so delve sees variables and lines as written. It is one
// GOFLAGS entry, quoted because its value holds a space (GOFLAGS entries
// are space-separated; the go command unquotes them).
const DebugGCFlags = `'-gcflags=all=-N -l'`

// DelveModule and DelveVersion are what a debug build installs with the
// builder's own toolchain. This delve needs Go 1.25 or newer in the
// builder (its go.mod says go 1.25.0).
const (
	DelveModule  = "github.com/go-delve/delve/cmd/dlv"
	DelveVersion = "v1.27.2"
)

// delveWorkspacePath is where the debug build leaves delve in the
// workspace, for the layer that puts it at DebugDelvePath.
const delveWorkspacePath = ".devloop-debug/dlv"

// delveInstall runs before the run step's own command in a debug build
// ("$@" is that command). go install with the builder's toolchain, built
// for the target platform (GOOS/GOARCH are the build's), optimized
// (GOFLAGS cleared: the user's flags, such as -mod=vendor, are for their
// module, not delve's) and static (CGO off). GOBIN stays unset because go
// install refuses it when cross-compiling; the binary then lands in
// GOPATH/bin, or GOPATH/bin/GOOS_GOARCH for another platform. With the
// module and build caches on the cache volume delve is compiled once.
const delveInstall = `set -e
if [ ! -x ` + delveWorkspacePath + ` ]; then
  GOFLAGS= GOBIN= CGO_ENABLED=0 go install ` + DelveModule + "@" + DelveVersion + `
  bin="$(go env GOPATH)/bin"
  [ "$(go env GOHOSTOS)/$(go env GOHOSTARCH)" = "$(go env GOOS)/$(go env GOARCH)" ] || bin="$bin/$(go env GOOS)_$(go env GOARCH)"
  mkdir -p "$(dirname ` + delveWorkspacePath + `)"
  cp "$bin/dlv" ` + delveWorkspacePath + `
fi
exec "$@"`

// debugBuild says whether img is built as a debug build: it has a run
// step and is listed in the devloop.dev/debug annotation.
func debugBuild(env *v1alpha1.DevEnvironment, img *v1alpha1.ImageSpec) bool {
	return img.Run != nil && env.DebugsImage(img.Name)
}

// DebugImageSpec is img as a debug build makes it: the run step's GOFLAGS
// turn optimizations off (DebugRunEnv), delve is installed before the
// run step's command (delveInstall, through sh -c, which Go builder
// images have), and a layer puts it at DebugDelvePath. An image without a
// run step is returned as it is. img is not changed.
func DebugImageSpec(img *v1alpha1.ImageSpec) *v1alpha1.ImageSpec {
	if img.Run == nil {
		return img
	}
	out := *img
	// Delve runs the program, not the supervisor: no live paths, so the
	// program is a plain file where the image says.
	out.LiveUpdate = nil
	run := *img.Run
	run.Env = DebugRunEnv(run.Env)
	run.Command = append([]string{"sh", "-c", delveInstall, "sh"}, run.Command...)
	out.Run = &run
	out.Layers = append(append([]v1alpha1.LayerMapping(nil), img.Layers...),
		v1alpha1.LayerMapping{From: delveWorkspacePath, To: v1alpha1.DebugDelvePath, Mode: "0755"})
	return &out
}

// DebugRunEnv is a run step's env for a debug build: env with
// DebugGCFlags appended to GOFLAGS. The last GOFLAGS entry is the one a
// container gets, so the merge starts from it and replaces it in place;
// without one, GOFLAGS is added. A Makefile or command that sets GOFLAGS
// itself overrides this, and the build is then not a debug build.
func DebugRunEnv(env []v1alpha1.EnvVar) []v1alpha1.EnvVar {
	out := append([]v1alpha1.EnvVar(nil), env...)
	for i := len(out) - 1; i >= 0; i-- {
		if out[i].Name == "GOFLAGS" {
			out[i].Value = mergeGoFlags(out[i].Value)
			return out
		}
	}
	return append(out, v1alpha1.EnvVar{Name: "GOFLAGS", Value: DebugGCFlags})
}

// mergeGoFlags appends DebugGCFlags to flags; a -gcflags entry already
// there is dropped, since the go command keeps only the last one anyway
// and a debug build must not keep optimizations on.
func mergeGoFlags(flags string) string {
	var kept []string
	for _, f := range splitGoFlags(flags) {
		name := strings.TrimLeft(strings.Trim(f, `'"`), "-")
		if strings.HasPrefix(name, "gcflags=") || name == "gcflags" {
			continue
		}
		kept = append(kept, f)
	}
	return strings.Join(append(kept, DebugGCFlags), " ")
}

// splitGoFlags splits GOFLAGS as the go command does: on spaces, except
// inside single or double quotes (which stay in the entry).
func splitGoFlags(s string) []string {
	var out []string
	var cur strings.Builder
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote = r
			cur.WriteRune(r)
		case r == ' ' || r == '\t' || r == '\n' || r == '\r':
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

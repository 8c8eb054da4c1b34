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

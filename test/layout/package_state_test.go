package layout

import (
	"go/ast"
	"go/token"
	"maps"
	"slices"
	"strings"
	"testing"
)

// packageStateAllowed are the package-level vars of product packages that
// hold or may hold state, by file and name, each with why it stays. The
// rest of a process's state is owned by what operator.New builds (a field
// of an engine, passed in), so two operators in one process — an envtest
// suite beside a benchmark — share nothing by accident.
var packageStateAllowed = map[string]string{
	"internal/image/liveupdate_layer.go:supervisorLayers":  "a memo of the supervisor binary's layer: content-addressed, the same for every operator",
	"internal/image/liveupdate_layer.go:supervisorDigests": "the digests of that layer, as content-addressed as it",
	"internal/metrics/reconcile.go:StepDuration":           "a Prometheus collector, registered once with the process's registry as controller-runtime's are",
	"internal/metrics/requests.go:APIRequests":             "a Prometheus collector (as StepDuration)",
	"internal/metrics/workdir.go:WorkDirBytes":             "a Prometheus collector (as StepDuration)",
	"internal/testrun/metrics.go:RunsTotal":                "a Prometheus collector (as StepDuration)",
	"internal/testrun/metrics.go:RunDuration":              "a Prometheus collector (as StepDuration)",
	"internal/source/git.go:gitStrategyHook":               "a test seam: which fetch strategy ran, nil in the product",
	"internal/egress/dial.go:ContextTransport":             "a RoundTripper of no fields: nothing to share",
	"internal/ui/server.go:assets":                         "go:embed: the dashboard's files, read-only",
	"internal/source/store.go:bootID":                      "sync.OnceValue: the host's boot ID, read once, constant after",
	"internal/supervisor/delta.go:rollOut":                 "computed once at start (a constant of the build), read-only after",
	"internal/image/index.go:defaultPlatform":              "computed once at start (the host's platform), read-only after",
	"internal/cli/root.go:scheme":                          "the plugin's scheme, built once at start, read-only after",
	"internal/egress/dial.go:unrestricted":                 "the empty policy, never written",
	"internal/plan/run_templates.go:exampleImage":          "a constant example for template checks, never written",
}

// TestNoPackageLevelState: no product package (internal/…, controllers)
// declares package-level mutable state outside packageStateAllowed. A
// var may hold a constant a Go const cannot: a regexp, an error, a
// template, a time, a string, number or boolean expression, a table (a
// map, slice or array literal), a value of another package's type, or
// `_` (an interface check). Anything else — a zero value of a type (a
// sync.Map, an atomic, a hook), a pointer to a literal, a local struct
// literal, a constructor's result — is state, and belongs to what
// operator.New builds.
func TestNoPackageLevelState(t *testing.T) {
	found := map[string]string{}
	eachGoFile(t, false, func(fset *token.FileSet, rel string, f *ast.File) {
		if !strings.HasPrefix(rel, "internal/") && !strings.HasPrefix(rel, "controllers/") || testHelperPackage(rel) {
			return
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for i, name := range vs.Names {
					var value ast.Expr
					if i < len(vs.Values) {
						value = vs.Values[i]
					}
					if name.Name != "_" && !constantValue(value) {
						found[rel+":"+name.Name] = fset.Position(name.Pos()).String()
					}
				}
			}
		}
	})
	if len(found) == 0 {
		t.Fatal("no package-level state anywhere, the metrics' collectors included: is this check still about anything?")
	}
	for _, k := range slices.Sorted(maps.Keys(found)) {
		if _, ok := packageStateAllowed[k]; !ok {
			t.Errorf("%s: package-level state (%s); make it a field of what operator.New builds, or pass it in", found[k], k)
		}
	}
	for k := range packageStateAllowed {
		if _, ok := found[k]; !ok {
			t.Errorf("%s is allowed package-level state but holds none (moved, renamed or made constant): drop it from packageStateAllowed", k)
		}
	}
}

// testHelperPackage: rel is in a package only tests import
// (internal/testenv, testregistry, testfiles), not the product.
func testHelperPackage(rel string) bool {
	for _, p := range []string{"internal/testenv/", "internal/testregistry/", "internal/testfiles/"} {
		if strings.HasPrefix(rel, p) {
			return true
		}
	}
	return false
}

// constantCalls are the functions whose result is a constant a Go const
// cannot hold.
var constantCalls = map[string]bool{
	"regexp.MustCompile": true, "errors.New": true, "fmt.Errorf": true, "template.Must": true,
	"time.Unix": true, "strconv.Itoa": true,
}

// constantValue: e is a value the rule counts as constant (see
// TestNoPackageLevelState); nil (no value: a zero value of a type) is not.
func constantValue(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.BasicLit:
		return true
	case *ast.Ident:
		return e.Name != "nil"
	case *ast.BinaryExpr:
		return constantValue(e.X) && constantValue(e.Y)
	case *ast.ParenExpr:
		return constantValue(e.X)
	case *ast.SelectorExpr:
		return true
	case *ast.CompositeLit:
		// A table, or a value of another package's type
		// (schema.GroupVersion{…}); a local struct literal may hold a
		// lock or a map that is written, so it is listed.
		switch e.Type.(type) {
		case *ast.ArrayType, *ast.MapType, *ast.SelectorExpr:
			return true
		}
		return false
	case *ast.CallExpr:
		// A conversion of a constant ([]byte("{}")).
		if _, ok := e.Fun.(*ast.ArrayType); ok {
			return len(e.Args) == 1 && constantValue(e.Args[0])
		}
		// A method of a constant (time.Unix(0, 0).UTC(),
		// corev1.SchemeGroupVersion.WithKind("Secret")).
		if sel, ok := e.Fun.(*ast.SelectorExpr); ok {
			if x, ok := sel.X.(*ast.Ident); ok && constantCalls[x.Name+"."+sel.Sel.Name] {
				return true
			}
			if call, ok := sel.X.(*ast.CallExpr); ok && constantValue(call) {
				return true
			}
			if inner, ok := sel.X.(*ast.SelectorExpr); ok && isUpperPackageValue(inner) {
				return true
			}
		}
	}
	return false
}

// isUpperPackageValue: pkg.Value, an exported value of another package
// (corev1.SchemeGroupVersion) whose method makes a constant.
func isUpperPackageValue(sel *ast.SelectorExpr) bool {
	_, ok := sel.X.(*ast.Ident)
	return ok && sel.Sel.Name != "" && strings.ToUpper(sel.Sel.Name[:1]) == sel.Sel.Name[:1]
}

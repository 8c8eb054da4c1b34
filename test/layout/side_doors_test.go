package layout

import (
	"go/ast"
	"go/token"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestLiveUpdateDoesNotLinkTheDeployEngine: the live update engine needs
// one thing of the deploy engine, the annotation naming an object's
// environment, which lives in the API package; linking the deploy engine
// for it brought Helm along and made every deploy change rebuild live
// update.
func TestLiveUpdateDoesNotLinkTheDeployEngine(t *testing.T) {
	deps := depsOf(t, "internal/liveupdate")
	if !slices.Contains(deps, module+"api/v1alpha1") {
		t.Fatal("./internal/liveupdate no longer depends on api/v1alpha1: is this check still about anything?")
	}
	for _, p := range []string{"internal/deploy", "internal/deploy/helm"} {
		if slices.Contains(deps, module+p) {
			t.Errorf("./internal/liveupdate depends on %s: share constants through api/v1alpha1", p)
		}
	}
}

// TestPluginDoesNotLinkTheBuildEngine: the kubectl plugin reads builder
// pods by their container names, which the API package holds; it has no
// use for the build engine (builder Jobs, warm builders, image assembly).
func TestPluginDoesNotLinkTheBuildEngine(t *testing.T) {
	for _, pkg := range []string{"internal/cli", "cmd/kubectl-devloop"} {
		deps := depsOf(t, pkg)
		if !slices.Contains(deps, module+"api/v1alpha1") {
			t.Fatalf("./%s no longer depends on api/v1alpha1: is this check still about anything?", pkg)
		}
		if slices.Contains(deps, module+"internal/build") {
			t.Errorf("./%s depends on internal/build: share names through api/v1alpha1", pkg)
		}
	}
}

// TestEachDevloopKeyIsDefinedOnce parses every non-test Go file of the
// module and fails when two constants spell the same devloop.dev/ label
// or annotation key: two copies drift apart, and an object labelled by
// one is not found by a selector on the other. The one copy of a key
// engines share is in api/v1alpha1 (an engine's own protocol stays in the
// engine).
func TestEachDevloopKeyIsDefinedOnce(t *testing.T) {
	defined := map[string][]string{}
	eachGoFile(t, false, func(_ *token.FileSet, rel string, f *ast.File) {
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.CONST {
				continue
			}
			for _, spec := range gen.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, v := range vs.Values {
					lit, ok := v.(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					s, err := strconv.Unquote(lit.Value)
					if err != nil || !strings.HasPrefix(s, "devloop.dev/") {
						continue
					}
					defined[s] = append(defined[s], rel+": "+vs.Names[i].Name)
				}
			}
		}
	})
	if _, ok := defined["devloop.dev/environment"]; !ok {
		t.Fatalf("no constant spells devloop.dev/environment: is this check still about anything? (%d keys found)", len(defined))
	}
	for key, where := range defined {
		if len(where) > 1 {
			t.Errorf("%s is defined %d times: %s; keep the one in api/v1alpha1", key, len(where), strings.Join(where, ", "))
		}
	}
}

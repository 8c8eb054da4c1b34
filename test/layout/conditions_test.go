package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
)

// TestOnlyTheOwnerWritesACondition reads the non-test files of every
// product package and finds where each writes a condition:
// meta.SetStatusCondition (its Condition's Type), meta.RemoveStatusCondition
// (its type), and calls of the package's own helpers that pass a type on
// to those. Each type written must be a v1alpha1.Condition constant whose
// owner (v1alpha1.ConditionOwners) is the package; a package that owns no
// condition must not assign status.conditions either.
func TestOnlyTheOwnerWritesACondition(t *testing.T) {
	root, err := filepath.Abs(testenv.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	consts := conditionConstants(t, filepath.Join(root, "api", "v1alpha1", "conditions.go"))
	owners := map[string]bool{}
	for _, pkg := range v1alpha1.ConditionOwners {
		owners[pkg] = true
	}
	writes := 0
	for _, pkg := range productPackages(t, root) {
		if !isProduct(modulePath + "/" + pkg) {
			continue
		}
		for _, w := range conditionWrites(t, filepath.Join(root, pkg)) {
			writes++
			switch {
			case w.typ == "":
				if !owners[pkg] {
					t.Errorf("%s: %s writes status.conditions, and %s owns no condition (v1alpha1.ConditionOwners)", w.pos, w.how, pkg)
				}
			case consts[w.typ] == "":
				t.Errorf("%s: %s writes a condition of type %s, not a v1alpha1.Condition constant", w.pos, w.how, w.typ)
			case v1alpha1.ConditionOwners[consts[w.typ]] != pkg:
				t.Errorf("%s: %s writes %s, which %q owns (v1alpha1.ConditionOwners)", w.pos, w.how, consts[w.typ], v1alpha1.ConditionOwners[consts[w.typ]])
			}
		}
	}
	if writes < 4 {
		t.Fatalf("%d condition writes found: is this check still about anything?", writes)
	}
}

// conditionWrite is one place a package writes a condition: typ is the
// v1alpha1 constant's name, empty for an assignment of the whole list.
type conditionWrite struct {
	pos, how, typ string
}

// conditionWrites finds the condition writes of the package in dir.
func conditionWrites(t *testing.T, dir string) []conditionWrite {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var funcs []*ast.FuncDecl
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Body != nil {
				funcs = append(funcs, fn)
			}
		}
	}
	// helpers: functions of the package that pass their argument at an
	// index on as a condition type.
	helpers := map[string]int{}
	var writes []conditionWrite
	for changed := true; changed; {
		changed = false
		writes = writes[:0]
		for _, fn := range funcs {
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CallExpr:
					typ, how := conditionTypeArg(n, helpers)
					if typ == nil {
						return true
					}
					pos := fset.Position(n.Pos()).String()
					if sel, ok := typ.(*ast.SelectorExpr); ok && isIdent(sel.X, "v1alpha1") {
						writes = append(writes, conditionWrite{pos, how, sel.Sel.Name})
						return true
					}
					if id, ok := typ.(*ast.Ident); ok {
						if i := paramIndex(fn, id.Name); i >= 0 {
							if _, known := helpers[fn.Name.Name]; !known {
								helpers[fn.Name.Name] = i
								changed = true
							}
							return true
						}
					}
					writes = append(writes, conditionWrite{pos, how, exprString(typ)})
				case *ast.AssignStmt:
					for _, lhs := range n.Lhs {
						if sel, ok := lhs.(*ast.SelectorExpr); ok && sel.Sel.Name == "Conditions" {
							writes = append(writes, conditionWrite{fset.Position(n.Pos()).String(), "an assignment to " + exprString(lhs), ""})
						}
					}
				}
				return true
			})
		}
	}
	return writes
}

// conditionTypeArg is the condition type a call writes, if it writes one.
func conditionTypeArg(call *ast.CallExpr, helpers map[string]int) (ast.Expr, string) {
	switch fun := call.Fun.(type) {
	case *ast.SelectorExpr:
		if isIdent(fun.X, "meta") && fun.Sel.Name == "RemoveStatusCondition" && len(call.Args) == 2 {
			return call.Args[1], "meta.RemoveStatusCondition"
		}
		if isIdent(fun.X, "meta") && fun.Sel.Name == "SetStatusCondition" && len(call.Args) == 2 {
			if lit, ok := call.Args[1].(*ast.CompositeLit); ok {
				for _, el := range lit.Elts {
					if kv, ok := el.(*ast.KeyValueExpr); ok && isIdent(kv.Key, "Type") {
						return kv.Value, "meta.SetStatusCondition"
					}
				}
			}
			return call.Args[1], "meta.SetStatusCondition"
		}
		// A method helper (p.setTriggerCondition).
		if i, ok := helpers[fun.Sel.Name]; ok && i < len(call.Args) {
			return call.Args[i], fun.Sel.Name
		}
	case *ast.Ident:
		if i, ok := helpers[fun.Name]; ok && i < len(call.Args) {
			return call.Args[i], fun.Name
		}
	}
	return nil, ""
}

func paramIndex(fn *ast.FuncDecl, name string) int {
	i := 0
	for _, field := range fn.Type.Params.List {
		for _, n := range field.Names {
			if n.Name == name {
				return i
			}
			i++
		}
		if len(field.Names) == 0 {
			i++
		}
	}
	return -1
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

func exprString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return exprString(e.X) + "." + e.Sel.Name
	}
	return "an expression"
}

// conditionConstants maps the names of the Condition constants in the
// API's conditions.go to their values.
func conditionConstants(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range f.Decls {
		gen, ok := d.(*ast.GenDecl)
		if !ok || gen.Tok != token.CONST {
			continue
		}
		for _, spec := range gen.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if !strings.HasPrefix(name.Name, "Condition") || i >= len(vs.Values) {
					continue
				}
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok {
					if v, err := strconv.Unquote(lit.Value); err == nil {
						out[name.Name] = v
					}
				}
			}
		}
	}
	if !slices.Contains(mapsValues(out), v1alpha1.ConditionReady) {
		t.Fatalf("no Condition constants found in %s", path)
	}
	return out
}

func mapsValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

package layout

import (
	"go/ast"
	"go/token"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// devloopKey is a devloop.dev/ label, annotation, finalizer or taint key
// inside a string.
var devloopKey = regexp.MustCompile(`devloop\.dev/[a-z0-9][a-z0-9.-]*`)

// TestNoFileSpellsAnotherFilesKey: a devloop.dev/ key a constant defines
// is written as that constant everywhere else, tests included (a test
// expecting a label by its spelling passes while the code moved to
// another key). TestEachDevloopKeyIsDefinedOnce keeps the definition one.
func TestNoFileSpellsAnotherFilesKey(t *testing.T) {
	definedIn := map[string]string{}
	eachGoFile(t, false, func(_ *token.FileSet, rel string, f *ast.File) {
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.CONST {
				continue
			}
			for _, spec := range gen.Specs {
				for _, v := range spec.(*ast.ValueSpec).Values {
					if s, ok := stringLit(v); ok && devloopKey.FindString(s) == s {
						definedIn[s] = rel
					}
				}
			}
		}
	})
	if definedIn["devloop.dev/live-update"] == "" {
		t.Fatalf("no constant defines devloop.dev/live-update: is this check still about anything? (%d keys)", len(definedIn))
	}
	var spelled []string
	eachGoFile(t, true, func(fset *token.FileSet, rel string, f *ast.File) {
		if strings.HasPrefix(rel, "test/layout/") {
			return
		}
		ast.Inspect(f, func(n ast.Node) bool {
			s, ok := stringLit(n)
			if !ok {
				return true
			}
			// The key itself, or a label or annotation line (key: value,
			// key=value); prose naming a key for a reader (help text, a
			// message) is not a second copy of it.
			key := devloopKey.FindString(s)
			if key == "" || !strings.HasPrefix(s, key) || len(s) > len(key) && !strings.ContainsRune(":=", rune(s[len(key)])) {
				return true
			}
			if def, ok := definedIn[key]; ok && def != rel {
				spelled = append(spelled, fset.Position(n.Pos()).String()+": "+key+" (defined in "+def+")")
			}
			return true
		})
	})
	sort.Strings(spelled)
	for _, s := range spelled {
		t.Errorf("%s: use the constant", s)
	}
}

// stringLit is the value of a string literal.
func stringLit(n ast.Node) (string, bool) {
	lit, ok := n.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

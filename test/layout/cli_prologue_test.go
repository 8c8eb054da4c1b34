package layout

import (
	"go/ast"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestCommandsConnectToTheirEnvironmentInOnePlace fails when a function
// of internal/cli connects (a.connect()) and then reads the environment
// itself (getEnv, findEnv): that prologue — the allow-list checked, the
// environment read, "not found" said with where it looked — is connectTo
// (or connectFind, for commands that may run before the environment
// exists). Rereads inside a command's loop take the session they were
// given and are not prologues. The dashboard (ui*.go) and push (push*.go)
// are left to their owners for now.
func TestCommandsConnectToTheirEnvironmentInOnePlace(t *testing.T) {
	prologues := map[string]bool{"connectTo": true, "connectFind": true}
	eachGoFile(t, false, func(fset *token.FileSet, rel string, f *ast.File) {
		base := filepath.Base(rel)
		if filepath.Dir(rel) != "internal/cli" || strings.HasPrefix(base, "ui") || strings.HasPrefix(base, "push") {
			return
		}
		check := func(name string, body *ast.BlockStmt, at token.Pos) {
			if body == nil || prologues[name] {
				return
			}
			connects, reads := false, false
			ast.Inspect(body, func(n ast.Node) bool {
				if call, ok := n.(*ast.CallExpr); ok {
					if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
						connects = connects || sel.Sel.Name == "connect"
						reads = reads || sel.Sel.Name == "getEnv"
					}
					if id, ok := call.Fun.(*ast.Ident); ok {
						reads = reads || id.Name == "findEnv"
					}
				}
				return true
			})
			if connects && reads {
				t.Errorf("%s: %s connects and reads its environment itself: use a.connectTo (or a.connectFind)", fset.Position(at), name)
			}
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			check(fn.Name.Name, fn.Body, fn.Pos())
		}
	})
}

package layout

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/devloop-dev/devloop/internal/testenv"
)

// productTrees are the trees whose packages docs/layout.md must name: the
// API, the binaries, the reconciler and everything under internal/.
var productTrees = []string{"./api/...", "./cmd/...", "./controllers/...", "./internal/..."}

// TestLayoutDocNamesEveryPackage keeps docs/layout.md current: every
// package of the product trees with non-test Go files is named there by
// its path (a line may name several). A package added without a line
// fails here, so the page a newcomer reads first cannot fall behind.
func TestLayoutDocNamesEveryPackage(t *testing.T) {
	root, err := filepath.Abs(testenv.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "layout.md"))
	if err != nil {
		t.Fatal(err)
	}
	pkgs := productPackages(t, root)
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d product packages (%v): is this check still about anything?", len(pkgs), pkgs)
	}
	for _, pkg := range pkgs {
		if !namesPackage(string(doc), pkg) {
			t.Errorf("docs/layout.md does not name %s: add a line saying what it owns", pkg)
		}
	}
}

// namesPackage reports whether doc names pkg as a path of its own: not as
// the prefix of a longer path (internal/build in internal/build/helper).
func namesPackage(doc, pkg string) bool {
	re := regexp.MustCompile(`(^|[\s,(` + "`" + `])` + regexp.QuoteMeta(pkg) + `/?([\s,)` + "`" + `]|$)`)
	return re.MatchString(doc)
}

// productPackages are the product trees' packages with non-test Go files,
// relative to the module.
func productPackages(t *testing.T, root string) []string {
	t.Helper()
	args := append([]string{"list", "-f", "{{if .GoFiles}}{{.ImportPath}}{{end}}"}, productTrees...)
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderrOf(err))
	}
	var pkgs []string
	for _, line := range strings.Fields(string(out)) {
		pkgs = append(pkgs, strings.TrimPrefix(line, modulePath+"/"))
	}
	return pkgs
}

// TestDocsIndexListsEveryPage keeps docs/README.md the one index of the
// documentation (README.md links to it rather than keeping a second
// list): every page under docs/ is linked from it.
func TestDocsIndexListsEveryPage(t *testing.T) {
	root, err := filepath.Abs(testenv.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	index, err := os.ReadFile(filepath.Join(root, "docs", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(pages) < 5 {
		t.Fatalf("docs/*.md: %d pages, %v: is this check still about anything?", len(pages), err)
	}
	for _, page := range pages {
		name := filepath.Base(page)
		if name != "README.md" && !strings.Contains(string(index), "("+name+")") {
			t.Errorf("docs/README.md does not link %s: add a line saying what it is for", name)
		}
	}
}

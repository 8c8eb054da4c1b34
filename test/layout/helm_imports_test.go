package layout

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/devloop-dev/devloop/internal/testenv"
)

const modulePath = "github.com/devloop-dev/devloop"

// helmOwner is the one product package that may import the Helm SDK: the
// deploy engine and everything else reach Helm through its plain types.
const helmOwner = modulePath + "/internal/deploy/helm"

// notProduct are the trees of tooling and tests, which may use Helm as
// they like (the local cluster installs the operator's chart with it).
var notProduct = []string{
	modulePath + "/internal/devcluster",
	modulePath + "/internal/olm",
	modulePath + "/internal/operatorimage",
	modulePath + "/internal/testenv",
	modulePath + "/internal/testregistry",
	modulePath + "/hack",
	modulePath + "/test",
}

// TestOnlyDeployHelmImportsHelm lists the direct imports of every
// package's non-test files (`go list`, as the build sees them) and fails
// when a product package other than internal/deploy/helm imports
// helm.sh/helm/v3: Helm stays behind that one package's thin wrappers.
func TestOnlyDeployHelmImportsHelm(t *testing.T) {
	root, err := filepath.Abs(testenv.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v\n%s", err, stderrOf(err))
	}
	ownerImportsHelm := false
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		pkg, imports := fields[0], fields[1:]
		helmImports := importsOfHelm(imports)
		switch {
		case pkg == helmOwner:
			ownerImportsHelm = len(helmImports) > 0
		case !isProduct(pkg):
		case len(helmImports) > 0:
			t.Errorf("%s imports %s: only %s may import the Helm SDK; use its types instead",
				pkg, strings.Join(helmImports, ", "), helmOwner)
		}
	}
	// Guards the check itself: a listing without the owner, or an owner
	// that no longer imports Helm, means the test looks at the wrong thing.
	if !ownerImportsHelm {
		t.Fatalf("%s is not listed, or imports no helm.sh/helm/v3 package:\n%s", helmOwner, out)
	}
}

func importsOfHelm(imports []string) []string {
	var helm []string
	for _, imp := range imports {
		if imp == "helm.sh/helm/v3" || strings.HasPrefix(imp, "helm.sh/helm/v3/") {
			helm = append(helm, imp)
		}
	}
	return helm
}

func isProduct(pkg string) bool {
	for _, tree := range notProduct {
		if pkg == tree || strings.HasPrefix(pkg, tree+"/") {
			return false
		}
	}
	return true
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

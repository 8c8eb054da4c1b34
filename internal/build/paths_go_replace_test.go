package build

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

// TestGoPackagePathsFollowLocalReplaces: Volcano's real go.mod replaces
// its API module with a directory of the same tree
// (`volcano.sh/apis => ./staging/src/volcano.sh/apis`), where the CRD
// types are developed. "go:cmd/scheduler" selects the replaced packages
// the scheduler imports (and that module's go.mod), so an edit of the
// API types rebuilds it; a replace to a module version or to a directory
// outside the source selects nothing.
func TestGoPackagePathsFollowLocalReplaces(t *testing.T) {
	g := NewWithT(t)
	root := t.TempDir()
	for name, content := range map[string]string{
		"go.mod": "module volcano.sh/volcano\n\ngo 1.26.0\n\nrequire volcano.sh/apis v0.0.0\n\n" +
			"replace (\n\tgithub.com/x/y => github.com/x/y v1.2.3\n\t// Use local staging directory for APIs development\n" +
			"\tvolcano.sh/apis => ./staging/src/volcano.sh/apis\n)\n\nreplace example.com/outside => ../outside\n",
		"go.sum":                             "sums\n",
		"cmd/scheduler/main.go":              "package main\n\nimport (\n\t_ \"volcano.sh/apis/pkg/apis/batch/v1alpha1\"\n\t_ \"github.com/x/y\"\n\t_ \"example.com/outside\"\n)\n",
		"staging/src/volcano.sh/apis/go.mod": "module volcano.sh/apis\n\ngo 1.26.0\n",
		"staging/src/volcano.sh/apis/pkg/apis/batch/v1alpha1/job.go":   "package v1alpha1\n\nimport _ \"volcano.sh/apis/pkg/apis/helpers\"\n",
		"staging/src/volcano.sh/apis/pkg/apis/helpers/helpers.go":      "package helpers\n",
		"staging/src/volcano.sh/apis/pkg/apis/bus/v1alpha1/command.go": "package v1alpha1\n",
	} {
		p := filepath.Join(root, filepath.FromSlash(name))
		g.Expect(os.MkdirAll(filepath.Dir(p), 0o755)).To(Succeed())
		g.Expect(os.WriteFile(p, []byte(content), 0o644)).To(Succeed())
	}
	sel, err := compilePaths([]string{"go:cmd/scheduler"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sel.files(root)).To(Equal([]string{
		"cmd/scheduler/main.go", "go.mod", "go.sum",
		"staging/src/volcano.sh/apis/go.mod",
		"staging/src/volcano.sh/apis/pkg/apis/batch/v1alpha1/job.go",
		"staging/src/volcano.sh/apis/pkg/apis/helpers/helpers.go",
	}))

	first, err := sel.digest(root)
	g.Expect(err).NotTo(HaveOccurred())
	job := filepath.Join(root, "staging/src/volcano.sh/apis/pkg/apis/batch/v1alpha1/job.go")
	g.Expect(os.WriteFile(job, []byte("package v1alpha1 // a new field\n"), 0o644)).To(Succeed())
	g.Expect(sel.digest(root)).NotTo(Equal(first), "an edit of the API types the scheduler compiles")
}

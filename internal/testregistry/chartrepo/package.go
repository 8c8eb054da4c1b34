package chartrepo

import (
	"os"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"

	"github.com/devloop-dev/devloop/internal/testfiles"
)

// Package packages the chart in dir as `helm package` does and returns
// the archive.
func Package(t testing.TB, dir string) []byte {
	t.Helper()
	ch, err := loader.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	file, err := chartutil.Save(ch, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// PackageFiles packages the chart whose files (slash path -> content) are
// given.
func PackageFiles(t testing.TB, files map[string]string) []byte {
	t.Helper()
	return Package(t, testfiles.Tree(t, files))
}

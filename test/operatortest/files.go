package operatortest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/devloop-dev/devloop/internal/testenv"
)

// DirFiles reads the files under root into source files under prefix,
// ready for AppFiles.
func DirFiles(t testing.TB, root, prefix string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		files[prefix+"/"+filepath.ToSlash(rel)] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// ChartFiles reads one of the feature tests' charts
// (testenv.FeatureCharts) into source files under prefix.
func ChartFiles(t testing.TB, name, prefix string) map[string]string {
	t.Helper()
	return DirFiles(t, filepath.Join(testenv.FeatureCharts(), name), prefix)
}

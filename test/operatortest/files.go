package operatortest

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
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

// ChartFiles reads one of the charts tests of several packages deploy
// (this package's testdata/charts: web, upgradehook, installhook) into
// source files under prefix.
func ChartFiles(t testing.TB, name, prefix string) map[string]string {
	t.Helper()
	return DirFiles(t, filepath.Join(testdata(), "charts", name), prefix)
}

// testdata is this package's testdata directory, wherever the test
// reading it runs.
func testdata() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "testdata")
}

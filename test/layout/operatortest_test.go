package layout

import (
	"slices"
	"testing"
)

// TestOnlyTestsImportTheOperatorRunner: test/operatortest runs the whole
// operator (it imports controllers and every engine), so a product
// package importing it would import itself or ship a test harness; only
// test files may.
func TestOnlyTestsImportTheOperatorRunner(t *testing.T) {
	for _, p := range []string{"cmd/...", "internal/...", "controllers", "api/..."} {
		if slices.Contains(depsOf(t, p), module+"test/operatortest") {
			t.Errorf("./%s depends on test/operatortest: only *_test.go files may", p)
		}
	}
}

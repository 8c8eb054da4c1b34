package build_test

import (
	"testing"

	"github.com/devloop-dev/devloop/test/operatortest"
)

// TestMain runs the package's tests, the build engine's through the
// running operator among them, against envtest (test/operatortest).
func TestMain(m *testing.M) { operatortest.Main(m) }

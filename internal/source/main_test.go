package source_test

import (
	"testing"

	"github.com/devloop-dev/devloop/test/operatortest"
)

// TestMain runs the package's tests, the sources step's through the
// running operator among them, against envtest (test/operatortest).
func TestMain(m *testing.M) { operatortest.Main(m) }

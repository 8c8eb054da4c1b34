package timeline_test

import (
	"testing"

	"github.com/devloop-dev/devloop/test/operatortest"
)

// TestMain runs the package's tests, the timeline written by the running
// operator among them, against envtest (test/operatortest).
func TestMain(m *testing.M) { operatortest.Main(m) }

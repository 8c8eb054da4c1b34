package liveupdate_test

import (
	"testing"

	"github.com/devloop-dev/devloop/test/operatortest"
)

// TestMain runs the package's tests, the live update engine's through the
// running operator among them, against envtest (test/operatortest).
func TestMain(m *testing.M) { operatortest.Main(m) }

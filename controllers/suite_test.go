package controllers_test

import (
	"testing"

	"github.com/devloop-dev/devloop/test/operatortest"
)

// TestMain runs the reconciler's tests against envtest and the operator
// as internal/operator wires it (test/operatortest).
func TestMain(m *testing.M) { operatortest.Main(m) }

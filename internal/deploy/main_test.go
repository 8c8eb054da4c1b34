package deploy_test

import (
	"testing"

	"github.com/devloop-dev/devloop/internal/deploy"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// TestMain runs the package's tests, the deploy engine's through the
// running operator among them, against one envtest (test/operatortest);
// the package's own tests reach it through UseCluster.
func TestMain(m *testing.M) {
	operatortest.Main(m, func() error { return deploy.UseCluster(operatortest.AdminConfig) })
}

package testrun_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/devloop-dev/devloop/internal/build/helper"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// TestMain runs the package's tests, the test-run engine's through the
// running operator among them, against envtest (test/operatortest). The
// go command may start this binary as the helper binary pods install
// (`<tools>/devloop helper gocacheprog ...`, TestSuiteGoFindsWhatItsBuildersCompiled):
// it then runs that helper step.
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "helper" && os.Args[2] == "gocacheprog" {
		if err := helper.Run(context.Background(), os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	operatortest.Main(m)
}

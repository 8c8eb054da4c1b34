// Package steadystate measures what devloop costs when a team's
// environments sit idle: the operator runs in this test process, as
// cmd/manager wires it, against envtest and the real registry. Only a
// benchmark lives here; without -bench the package starts nothing.
package steadystate

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/devloop-dev/devloop/internal/testenv"
)

var (
	k8s     client.Client
	testEnv *envtest.Environment
)

func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		// `go test ./...` (make test) compiles the benchmark and runs
		// nothing: envtest is not worth starting for it.
		os.Exit(m.Run())
	}
	os.Exit(testenv.RunWithClient(m, func(env *envtest.Environment, c client.Client) {
		testEnv, k8s = env, c
		if os.Getenv("DEVLOOP_TEST_VERBOSE") == "" {
			return
		}
		fmt.Fprintln(os.Stderr, "envtest at", env.Config.Host)
	}))
}

// Package steadystate measures what devloop costs when a team's
// environments sit idle: the operator runs in this test process, as
// cmd/manager wires it, against envtest and the real registry. Only a
// benchmark lives here; without -bench the package starts nothing.
package steadystate

import (
	"flag"
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

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
	// The operator's log is dropped unless asked for: fifty environments
	// coming up say a lot.
	ctrl.SetLogger(logr.Discard())
	if os.Getenv("DEVLOOP_TEST_VERBOSE") != "" {
		ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.WriteTo(os.Stderr)))
	}
	testenv.Main(m, func(env *testenv.Env) error {
		testEnv, k8s = env.Environment, env.Client
		return nil
	})
}

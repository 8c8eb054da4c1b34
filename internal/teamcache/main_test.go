package teamcache

import (
	"context"
	"os"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/internal/testenv"
)

// One API server for the package: admin makes the tenants; the service
// reads and reviews as the operator under exactly the chart's ClusterRole.
var (
	admin          client.Client
	adminSet       kubernetes.Interface
	operatorSet    kubernetes.Interface
	operatorCfg    *rest.Config
	operatorReader client.Reader
)

func TestMain(m *testing.M) {
	// The go command starts this test binary as its GOCACHEPROG
	// (TestGoBuildReadsTeamCache).
	if dir := os.Getenv(envProgDir); dir != "" {
		os.Exit(runTestProg(dir))
	}
	testenv.Main(m, func(e *testenv.Env) error {
		admin = e.Client
		var err error
		if adminSet, err = kubernetes.NewForConfig(e.Config); err != nil {
			return err
		}
		user, err := testenv.Operator(context.Background(), e.Environment, e.Client)
		if err != nil {
			return err
		}
		operatorCfg = user.Config()
		if operatorSet, err = kubernetes.NewForConfig(operatorCfg); err != nil {
			return err
		}
		operatorReader, err = client.New(user.Config(), client.Options{Scheme: testenv.Scheme()})
		return err
	})
}

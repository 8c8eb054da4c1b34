package registryauth

import (
	"context"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/internal/testenv"
)

// One API server for the package: admin creates the tenants, the reviews
// are made as the operator under exactly the chart's ClusterRole.
var (
	admin      client.Client
	adminSet   kubernetes.Interface
	operatorCS kubernetes.Interface
	// operatorCfg is the operator's connection, for tests that count
	// what it sends.
	operatorCfg *rest.Config
)

func TestMain(m *testing.M) {
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
		operatorCS, err = kubernetes.NewForConfig(operatorCfg)
		return err
	})
}

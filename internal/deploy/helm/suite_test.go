package helm

import (
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/internal/testenv"
)

// cfg and k8s reach the envtest API server as an administrator.
var (
	cfg *rest.Config
	k8s client.Client
)

func TestMain(m *testing.M) {
	testenv.Main(m, func(env *testenv.Env) error {
		cfg, k8s = env.Config, env.Client
		return nil
	})
}

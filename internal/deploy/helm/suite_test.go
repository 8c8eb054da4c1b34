package helm

import (
	"fmt"
	"os"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/internal/testenv"
)

// testCharts are the charts of internal/deploy's test data, which the
// controllers' tests use as well.
const testCharts = "../testdata/charts"

// cfg and k8s reach the envtest API server as an administrator.
var (
	cfg *rest.Config
	k8s client.Client
)

func TestMain(m *testing.M) {
	env, err := testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cfg = env.Config
	k8s, err = client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	code := 1
	if err == nil {
		code = m.Run()
	} else {
		fmt.Fprintln(os.Stderr, err)
	}
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

package deploy

import (
	"fmt"
	"os"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/internal/testenv"
)

// Set by TestMain: a real kube-apiserver and etcd, and an admin client.
var (
	restCfg   *rest.Config
	k8sClient client.Client
)

func TestMain(m *testing.M) {
	env, err := testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	restCfg = env.Config
	k8sClient, err = client.New(restCfg, client.Options{Scheme: testenv.Scheme()})
	code := 1
	if err == nil {
		code = m.Run()
	} else {
		fmt.Fprintln(os.Stderr, err)
	}
	_ = env.Stop()
	os.Exit(code)
}

// Package install tests devloop's install paths: the Helm chart, the
// kustomize bases, the OLM bundle and catalog. Rendered objects are sent to
// a real kube-apiserver (envtest) as server-side dry runs, and the chart is
// compared with config/default so the two cannot drift.
package install

import (
	"fmt"
	"os"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/devloop-dev/devloop/internal/testenv"
)

var (
	env *envtest.Environment
	k8s client.Client
)

func TestMain(m *testing.M) {
	var err error
	env, err = testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	k8s, err = client.New(env.Config, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		_ = env.Stop()
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping envtest:", err)
	}
	os.Exit(code)
}

// Package install tests devloop's install paths: the Helm chart, the
// kustomize bases, the OLM bundle and catalog. Rendered objects are sent to
// a real kube-apiserver (envtest) as server-side dry runs, and the chart is
// compared with config/default so the two cannot drift.
package install

import (
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
	testenv.Main(m, func(e *testenv.Env) error {
		env, k8s = e.Environment, e.Client
		return nil
	})
}

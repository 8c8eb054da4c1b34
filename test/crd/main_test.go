// Package crd tests the DevEnvironment CRD against a real kube-apiserver:
// what it accepts, what it rejects and how it explains itself.
package crd

import (
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
	os.Exit(testenv.RunWithClient(m, func(e *envtest.Environment, c client.Client) { env, k8s = e, c }))
}

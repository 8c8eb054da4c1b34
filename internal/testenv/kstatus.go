package testenv

import (
	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// Kstatus computes the kstatus of an environment as Flux's health checks
// and `kubectl wait`-style tooling would: Current, InProgress or Failed.
func Kstatus(env *v1alpha1.DevEnvironment) (*status.Result, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(env)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	// The API server always returns status.observedGeneration (the CRD
	// defaults it to 0); the Go type omits a 0, which kstatus would read
	// as "no generation to compare" and call a fresh object Current. Put
	// it back so this sees what Flux sees.
	if err := unstructured.SetNestedField(u.Object, env.Status.ObservedGeneration, "status", "observedGeneration"); err != nil {
		return nil, err
	}
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(v1alpha1.DevEnvironmentKind))
	return status.Compute(u)
}

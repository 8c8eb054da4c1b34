package deploy

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/deploy/helm"
	"github.com/devloop-dev/devloop/internal/source"
)

// loadChart loads component c's chart and its dependencies with the
// environment's chart credentials, whose Secrets are read through cl, the
// tenant's client; a dependency the release's values turn off is not
// fetched (values gives them, from the top chart). Errors name the field:
// spec.components[i].helm.chart.
func (e *Engine) loadChart(ctx context.Context, env *v1alpha1.DevEnvironment, c *v1alpha1.Component, art *source.Artifact, cl client.Reader, values func(*helm.Chart) (map[string]any, error)) (*helm.Chart, error) {
	charts := e.Charts
	if charts == nil {
		// Charts from sources need no cache; downloads are not cached.
		charts = &helm.ChartLoader{}
	}
	opts := helm.LoadOptions{
		PlainHTTP:   func(ociRef string) bool { return plainHTTPChart(env, ociRef) },
		Credentials: &helm.ChartCredentials{Entries: env.Spec.ChartCredentials, Namespace: env.Namespace, Reader: cl},
		Values:      values,
	}
	ch, err := charts.Load(ctx, c.Helm.Chart, art, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", chartField(env, c), err)
	}
	return ch, nil
}

// chartField is the path of c's chart in the spec.
func chartField(env *v1alpha1.DevEnvironment, c *v1alpha1.Component) string {
	for i := range env.Spec.Components {
		if env.Spec.Components[i].Name == c.Name {
			return fmt.Sprintf("spec.components[%d].helm.chart", i)
		}
	}
	return "component " + c.Name + ": helm.chart"
}

package deploy

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/identity"
	"github.com/devloop-dev/devloop/internal/source"
)

// deployKind is one way a component deploys: a Helm release
// (engine_helm*.go) or manifests applied server-side (engine_manifests.go).
// A third kind is one type with this method, one case in kindOf and its
// answers in the API type's accessors (api/v1alpha1/component_deploy.go);
// no other package asks which kind a component is (test/layout checks).
type deployKind interface {
	reconcile(ctx context.Context, d deployment) (Result, error)
}

// deployment is one reconcile of one component's deploy.
type deployment struct {
	env      *v1alpha1.DevEnvironment
	c        *v1alpha1.Component
	st       *v1alpha1.ComponentStatus
	sources  source.Resolved
	tenant   *identity.Tenant
	cl       client.Client
	images   []BuiltImage
	refs     map[string]ImageRef
	progress Progress
}

// kindOf is how c deploys; nil when it only builds images.
func (e *Engine) kindOf(c *v1alpha1.Component) deployKind {
	switch {
	case c.Helm != nil:
		return helmRelease{e}
	case c.Manifests != nil:
		return manifestsApplied{e}
	}
	return nil
}

// helmRelease installs or upgrades the component's chart as one release.
type helmRelease struct{ e *Engine }

func (k helmRelease) reconcile(ctx context.Context, d deployment) (Result, error) {
	return k.e.reconcileHelm(ctx, d.env, d.c, d.st, d.sources, d.tenant, d.cl, d.images, d.refs, d.progress)
}

// manifestsApplied applies the component's manifests server-side and
// prunes what it no longer lists.
type manifestsApplied struct{ e *Engine }

func (k manifestsApplied) reconcile(ctx context.Context, d deployment) (Result, error) {
	return k.e.reconcileManifests(ctx, d.env, d.c, d.st, d.sources, d.cl, d.images, d.progress)
}

package build

import (
	"context"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/image"
	"github.com/devloop-dev/devloop/internal/plan"
	"github.com/devloop-dev/devloop/internal/source"
)

// runBackend runs an image's run step somewhere in the cluster and pushes
// the result. It returns a result once every platform image is pushed and
// tagged, nil (with a short message of what it waits for) meanwhile.
// missing says the registry lost the image built from these inputs.
// Builder Jobs and warm builders are the two today; another (BuildKit in
// a pod, a remote builder) is one type with this method and one case in
// runBackendFor.
type runBackend interface {
	build(ctx context.Context, img *v1alpha1.ImageSpec, ist *v1alpha1.ImageStatus,
		spec image.Spec, ref source.Ref, inputs string, tags *plan.TagTemplates, missing bool) (*image.Result, string, error)
}

// jobsBackend runs the run step in one builder Job per platform (engine_jobs.go).
type jobsBackend struct{ s *imageBuilds }

func (b jobsBackend) build(ctx context.Context, img *v1alpha1.ImageSpec, ist *v1alpha1.ImageStatus,
	spec image.Spec, ref source.Ref, inputs string, tags *plan.TagTemplates, missing bool) (*image.Result, string, error) {
	return b.s.buildWithJobs(ctx, img, ist, spec, ref, inputs, tags, missing)
}

// warmBackend runs the run step in a warm builder pod per platform (engine_warm.go).
type warmBackend struct{ s *imageBuilds }

func (b warmBackend) build(ctx context.Context, img *v1alpha1.ImageSpec, ist *v1alpha1.ImageStatus,
	spec image.Spec, ref source.Ref, inputs string, tags *plan.TagTemplates, missing bool) (*image.Result, string, error) {
	return b.s.buildWarm(ctx, img, ist, spec, ref, inputs, tags, missing)
}

// runBackendFor is the one place that chooses where an image's run step
// runs: run.keepWarm asks for a warm builder, otherwise builder Jobs.
func (s *imageBuilds) runBackendFor(img *v1alpha1.ImageSpec) runBackend {
	if img.Run.KeepWarm {
		return warmBackend{s}
	}
	return jobsBackend{s}
}

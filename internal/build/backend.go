package build

import (
	"context"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/image"
	"github.com/devloop-dev/devloop/internal/plan"
	"github.com/devloop-dev/devloop/internal/source"
)

// backend builds one image whose inputs are known (ko's build.Interface is
// the model). In-process, builder Jobs and warm builders are the three
// backends; the policies every build follows — build only changed inputs,
// push, record in status (backend_policies.go), take turns on the build
// cache claim (lanes.go) — are decorators around one. A new backend (BuildKit in a pod, a remote
// builder) is one file with a type that has this method and one case in
// backendFor.
type backend interface {
	build(ctx context.Context, b *imageBuild) (built, error)
}

// imageBuild is one image's build as buildImage prepared it.
type imageBuild struct {
	// img is the image's spec with its run step rendered for this build.
	img *v1alpha1.ImageSpec
	// ist is the image's status entry, st the component's: a build pushed
	// behind records itself in st once its push is done.
	ist *v1alpha1.ImageStatus
	st  *v1alpha1.ComponentStatus
	// spec is what internal/image assembles, with its base pinned.
	spec image.Spec
	ref  source.Ref
	// inputs is the hash of everything the build reads.
	inputs string
	tags   *plan.TagTemplates
	// missing says the registry lost the image built from these inputs: a
	// builder that reported a digest the registry no longer holds is run
	// again rather than trusted.
	missing bool
	// turn is the image's turn on its build cache claim, set by
	// takingTurns: a backend asks it (waitTurn) before it starts a
	// builder.
	turn *turn
}

// built is what a backend (or a decorator) did with an image.
type built struct {
	// result is a build pushed and tagged, to record in status.
	result *image.Result
	// prepared is an image assembled in the operator, not yet pushed: the
	// publishing decorator pushes it.
	prepared *image.Prepared
	// waiting, when not empty, says what the build waits for (a builder
	// running, a turn on the cache claim); empty with neither result nor
	// prepared: nothing more to do this reconcile.
	waiting string
}

// backendFor is the one place that chooses where an image is built and
// wraps the backend in the policies. The innermost decorator runs last.
func (s *imageBuilds) backendFor(img *v1alpha1.ImageSpec) backend {
	var b backend
	switch {
	case img.Run == nil:
		b = inProcess{s}
	case img.Run.KeepWarm:
		b = warmBuilders{s}
	default:
		b = builderJobs{s}
	}
	return onlyChanged{s, recording{s, publishing{s, takingTurns{s, b}}}}
}

package build

import (
	"context"
	"encoding/json"
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/internal/image"
)

// outputSpecs are the outputs of img's run step as its builder gets them,
// each naming its field in the spec. An output whose repository is the
// repository of an image of the environment is refused: both would push
// there.
func (s *imageBuilds) outputSpecs(img *v1alpha1.ImageSpec) ([]image.OutputSpec, error) {
	if img.Run == nil || len(img.Run.Outputs) == 0 {
		return nil, nil
	}
	field := imageField(s.env, img.Name)
	specs := make([]image.OutputSpec, 0, len(img.Run.Outputs))
	for k, o := range img.Run.Outputs {
		f := fmt.Sprintf("%s.run.outputs[%d]", field, k)
		repo := image.OutputRepository(img.Name, o.Name)
		if other := imageField(s.env, repo); other != "" {
			return nil, fault.Stalledf(v1alpha1.ReasonInvalidSpec,
				"%s: the output is pushed to <registry.prefix>/%s, which is the repository of image %s (%s): rename the image or the output", f, repo, repo, other)
		}
		specs = append(specs, image.OutputSpec{Name: o.Name, Path: o.Path, Field: f})
	}
	return specs, nil
}

// imageField is "spec.components[i].images[j]" of the image named image,
// or "" when no component builds it.
func imageField(env *v1alpha1.DevEnvironment, image string) string {
	for i, c := range env.Spec.Components {
		for j, img := range c.Images {
			if img.Name == image {
				return fmt.Sprintf("spec.components[%d].images[%d]", i, j)
			}
		}
	}
	return ""
}

// outputsArgs are the helper's --outputs flag for req, if it has outputs.
func outputsArgs(req JobRequest) ([]string, error) {
	if len(req.Outputs) == 0 {
		return nil, nil
	}
	data, err := json.Marshal(req.Outputs)
	if err != nil {
		return nil, err
	}
	return []string{"--outputs", string(data)}, nil
}

// recordOutputs tags the outputs a builder reported with the image's
// content tag and records them in the image's status. Only the first
// platform's builder packs outputs (builderRequest), so reports are that
// one's. A declared output missing from the report is the builder's
// failure: the same inputs would report the same.
func (s *imageBuilds) recordOutputs(ctx context.Context, img *v1alpha1.ImageSpec, ist *v1alpha1.ImageStatus, reports []image.OutputReport, contentTag string) error {
	if img.Run == nil || len(img.Run.Outputs) == 0 {
		ist.Outputs = nil
		return nil
	}
	b, err := s.registry(ctx)
	if err != nil {
		return err
	}
	specs, err := s.outputSpecs(img)
	if err != nil {
		return err
	}
	reported := map[string]string{}
	for _, r := range reports {
		reported[r.Name] = r.Digest
	}
	outputs := make([]v1alpha1.OutputStatus, 0, len(specs))
	for _, o := range specs {
		digest := reported[o.Name]
		if _, err := v1.NewHash(digest); err != nil {
			return fault.Stalledf(v1alpha1.ReasonBuildFailed,
				"image %s: %s: the builder reported no valid digest for output %s (%q): is the operator's helper image older than the operator?", img.Name, o.Field, o.Name, digest)
		}
		if err := b.TagOutput(ctx, img.Name, o.Name, digest, contentTag); err != nil {
			return buildError(img.Name, fmt.Errorf("output %s: %w", o.Name, err))
		}
		outputs = append(outputs, v1alpha1.OutputStatus{Name: o.Name, Repository: b.Repository(image.OutputRepository(img.Name, o.Name)), Digest: digest})
	}
	ist.Outputs = outputs
	return nil
}

// outputsHeld says whether the registry still holds every output the
// image's status records, each tagged with its content tag.
func (s *imageBuilds) outputsHeld(ctx context.Context, img *v1alpha1.ImageSpec, ist *v1alpha1.ImageStatus) (bool, error) {
	if img.Run == nil || len(img.Run.Outputs) == 0 {
		return true, nil
	}
	if len(ist.Outputs) != len(img.Run.Outputs) {
		return false, nil
	}
	b, err := s.registry(ctx)
	if err != nil {
		return false, err
	}
	for _, o := range ist.Outputs {
		held, err := b.HoldsOutput(ctx, img.Name, o.Name, o.Digest, ist.ContentHash)
		if err != nil || !held {
			return false, err
		}
	}
	return true, nil
}

// reportGone says, after the registry lost an image or one of its
// outputs, whether what a builder reported is gone too: the platform
// image, or an output it pushed. Then it must be built again.
func (s *imageBuilds) reportGone(ctx context.Context, img *v1alpha1.ImageSpec, report AssembleReport) (bool, error) {
	gone, err := s.reportedMissing(ctx, img, report.Digest)
	if err != nil || gone || len(report.Outputs) == 0 {
		return gone, err
	}
	b, err := s.registry(ctx)
	if err != nil {
		return false, err
	}
	for _, o := range report.Outputs {
		held, err := b.HoldsOutput(ctx, img.Name, o.Name, o.Digest, "")
		if err != nil {
			return false, buildError(img.Name, err)
		}
		if !held {
			return true, nil
		}
	}
	return false, nil
}

package image

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/internal/source"
)

// A run step's outputs (images[].run.outputs) are directories of the
// workspace that later components deploy: generated CRDs, RBAC, a bundle.
// After the build command, the container that pushes the image (the
// builder Job's assemble container, the warm builder's fetch-push agent:
// never the build container) packs each output exactly as `kubectl devloop
// push` packs a directory (source.PackDir: one tar layer, sorted entries,
// fixed times, owners 0) and pushes it by digest to OutputRepository. The
// digests travel back with the image's AssembleReport; the operator tags
// each output with the image's content tag (so registry garbage collection
// keeps it) and records it in the image's status.outputs, where an output
// source (spec.sources[].output) reads it. The same files give the same
// digest, so an unchanged output redeploys nothing.

// OutputsSegment is the path segment between an image's repository and its
// outputs': <registry.prefix>/<image>/outputs/<name>. An image named like
// that repository is refused (Session.outputSpecs).
const OutputsSegment = "outputs"

// MaxOutputBytes bounds the files of one output: it is packed in memory,
// and an output is meant for manifests and charts, not binaries.
const MaxOutputBytes = 128 << 20

// outputLimit is MaxOutputBytes; tests lower it.
var outputLimit int64 = MaxOutputBytes

// OutputSpec is an output as the helper receives it.
type OutputSpec struct {
	Name string `json:"name"`
	// Path is relative to the workspace.
	Path string `json:"path"`
	// Field names the output in the spec
	// ("spec.components[0].images[1].run.outputs[0]"), for errors.
	Field string `json:"field"`
}

// OutputReport is an output as pushed: its artifact's manifest digest.
type OutputReport struct {
	Name   string `json:"name"`
	Digest string `json:"digest"`
}

// OutputRepository is the repository, under the registry prefix, of an
// image's output.
func OutputRepository(image, output string) string {
	return image + "/" + OutputsSegment + "/" + output
}

// PushOutputs packs each output directory of the workspace dir and pushes
// it by digest (no tag: the operator tags it once the whole build is
// published). A missing directory, a symbolic link leaving it, or an
// output over MaxOutputBytes fails naming the output's field.
func (b *Builder) PushOutputs(ctx context.Context, image, dir string, outputs []OutputSpec) ([]OutputReport, error) {
	reports := make([]OutputReport, 0, len(outputs))
	for _, out := range outputs {
		artifact, err := b.PackOutput(dir, out)
		if err != nil {
			return nil, err
		}
		repo, err := b.outputRepository(image, out.Name)
		if err != nil {
			return nil, err
		}
		digest, _, err := b.pushByDigest(ctx, repo, artifact)
		if err != nil {
			return nil, fmt.Errorf("%s: pushing %s: %w", out.Field, out.Path, err)
		}
		reports = append(reports, OutputReport{Name: out.Name, Digest: digest.String()})
	}
	return reports, nil
}

// PackOutput packs one output directory of dir as the artifact
// `kubectl devloop push` would make of it. It first copies the directory
// into a private temporary directory through an os.Root, so a process of
// the build still running cannot swap a file for a link to what only
// this container can read (the registry credentials) between the checks
// and the packing.
func (b *Builder) PackOutput(dir string, out OutputSpec) (v1.Image, error) {
	snapshot, err := os.MkdirTemp("", "devloop-output-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(snapshot)
	if err := copyOutput(dir, out, snapshot); err != nil {
		return nil, err
	}
	compression := b.reg.Compression.For(b.registryHost)
	img, err := source.PackDir(snapshot, nil, compression)
	if err != nil {
		return nil, fmt.Errorf("%s: packing %s: %w", out.Field, out.Path, err)
	}
	return img, nil
}

// outputRepository parses the repository of an image's output.
func (b *Builder) outputRepository(image, output string) (name.Repository, error) {
	return b.repository(OutputRepository(image, output))
}

// TagOutput points tag at an output pushed by digest, unless it does
// already.
func (b *Builder) TagOutput(ctx context.Context, image, output, digest, tag string) error {
	repo, err := b.outputRepository(image, output)
	if err != nil {
		return err
	}
	h, err := v1.NewHash(digest)
	if err != nil {
		return fault.Permanentf("image %s: output %s: digest %q: %v", image, output, digest, err)
	}
	if desc, err := b.puller.Head(ctx, repo.Tag(tag)); err == nil && desc.Digest == h {
		return nil
	} else if err != nil && !isNotFound(err) {
		return pushError(err, repo.String())
	}
	manifest, err := b.puller.Get(ctx, repo.Digest(digest))
	if err != nil {
		return pushError(err, repo.String())
	}
	pusher, err := b.newPusher()
	if err != nil {
		return err
	}
	if err := pusher.Put(ctx, repo.Tag(tag), manifest); err != nil {
		return pushError(err, repo.String())
	}
	return nil
}

// HoldsOutput reports whether the registry still has an output's artifact
// and its tag (HEAD requests only).
func (b *Builder) HoldsOutput(ctx context.Context, image, output, digest, tag string) (bool, error) {
	repo, err := b.outputRepository(image, output)
	if err != nil {
		return false, err
	}
	h, err := v1.NewHash(digest)
	if err != nil {
		return false, fault.Permanentf("image %s: output %s: digest %q: %v", image, output, digest, err)
	}
	var tags []string
	if tag != "" {
		tags = []string{tag}
	}
	state, err := b.inRegistry(ctx, repo, h, tags)
	if err != nil {
		return false, err
	}
	return !state.manifestMissing && len(state.tagsToMove) == 0, nil
}

// outputError is an output that cannot be packed: the build's fault,
// not the registry's.
func outputError(out OutputSpec, format string, args ...any) error {
	return fault.Permanentf("%s: %s", out.Field, fmt.Sprintf(format, args...))
}

// isMissing says whether err is a file or directory not being there.
func isMissing(err error) bool {
	return errors.Is(err, fs.ErrNotExist)
}

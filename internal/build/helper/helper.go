// Package helper is the build's side of `manager helper`: the steps of
// builder Jobs and warm builders that run the operator's own binary, so a
// pod assembles and pushes exactly as the operator would in-process.
// internal/build writes their command lines (BuilderJob, WarmPod,
// WarmBuildSteps) and reads what they report (AssembleReport); this
// package is the other end. The fetch step builder and test pods share is
// pods.FetchStep, and a test pod's report step testrun.ReportStep.
package helper

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/internal/image"
	"github.com/devloop-dev/devloop/internal/pods"
)

// Steps are the helper steps this package runs, by name.
var Steps = []string{"assemble", "install", "idle", "build", "gocacheprog", "count-packages"}

// Run runs one of Steps: args[0] is its name, the rest its flags.
func Run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("want one of %v", Steps)
	}
	switch args[0] {
	case "assemble":
		return assembleStep(ctx, args[1:])
	case "install":
		return installStep(args[1:])
	case "idle":
		// A warm builder waits for builds, until its pod stops.
		return idleStep(ctx, args[1:])
	case "build":
		return buildStep(ctx, args[1:])
	case "gocacheprog":
		// The go command's build cache, with the team's (teamcache.Prog).
		return gocacheprogStep(ctx, args[1:])
	case "count-packages":
		// A builder Job's build command, after counting its packages.
		return countStep(ctx, args[1:])
	default:
		return fmt.Errorf("unknown build helper step %q: want one of %v", args[0], Steps)
	}
}

// ExitCodeFor is err as the helper process ends with it: an error of
// something unavailable (fault.Unavailable: a registry down) exits with
// build.ExitUnavailable, so the operator retries the step instead of
// failing the build; an ExitError keeps its code.
func ExitCodeFor(err error) error {
	var code ExitError
	var nsh *image.NoSuchHostError
	switch {
	case err == nil || errors.As(err, &code) || !fault.IsUnavailable(err):
		return err
	case errors.As(err, &nsh):
		return ExitError{Code: build.ExitNoSuchHost, err: err}
	}
	return ExitError{Code: build.ExitUnavailable, err: err}
}

// assembleStep layers the workspace onto the base for one platform,
// pushes the image by digest (no tag: the operator tags once every
// platform is pushed) and reports the digest in the termination message.
func assembleStep(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("helper assemble", flag.ContinueOnError)
	imageJSON := fs.String("image", "", "the image to assemble, as JSON")
	platform := fs.String("platform", v1alpha1.DefaultPlatform, "os/arch of the image")
	dir := fs.String("dir", pods.WorkspaceDir, "directory the layers take files from")
	registryJSON := fs.String("registry", "", "the registry, as JSON")
	dockerConfig := fs.String("docker-config", "", "a .dockerconfigjson file with registry credentials")
	report := fs.String("termination-log", pods.TerminationLog, "where to write the report")
	outputsJSON := fs.String("outputs", "", "the run step's outputs to pack and push, as JSON")
	registryWait := fs.Duration("registry-wait", 0, "how long to wait for a registry that is down before giving up (registrywait.go)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var img image.Spec
	if err := json.Unmarshal([]byte(*imageJSON), &img); err != nil {
		return fmt.Errorf("--image: %w", err)
	}
	var out []byte
	err := whileRegistryDown(ctx, *registryWait, os.Stdout, func() (err error) {
		out, err = assembleAndPush(ctx, img, *platform, *dir, *registryJSON, *dockerConfig, *outputsJSON, os.Stdout)
		return err
	})
	if err != nil {
		return err
	}
	return os.WriteFile(*report, out, 0o644)
}

// assembleAndPush packs and pushes the run step's outputs in dir (first:
// a missing one fails before anything else is pushed), layers dir onto
// the base for platform, pushes the image by digest, and returns the
// AssembleReport as JSON; progress goes to log.
func assembleAndPush(ctx context.Context, img image.Spec, platform, dir, registryJSON, dockerConfig, outputsJSON string, log io.Writer) ([]byte, error) {
	var regCfg build.RegistryConfig
	if err := json.Unmarshal([]byte(registryJSON), &regCfg); err != nil {
		return nil, fmt.Errorf("--registry: %w", err)
	}
	var outputs []image.OutputSpec
	if outputsJSON != "" {
		if err := json.Unmarshal([]byte(outputsJSON), &outputs); err != nil {
			return nil, fmt.Errorf("--outputs: %w", err)
		}
	}
	reg := image.Registry{Prefix: regCfg.Prefix, Insecure: regCfg.Insecure, Compression: regCfg.Compression}
	if dockerConfig != "" {
		data, err := os.ReadFile(dockerConfig)
		if err != nil {
			return nil, err
		}
		if reg.Keychain, err = image.KeychainFromDockerConfig(data); err != nil {
			return nil, fmt.Errorf("%s: %w", dockerConfig, err)
		}
	}
	b, err := image.NewBuilder(reg)
	if err != nil {
		return nil, err
	}
	pushedOutputs, err := b.PushOutputs(ctx, img.Name, dir, outputs)
	if err != nil {
		return nil, err
	}
	for _, o := range pushedOutputs {
		fmt.Fprintf(log, "pushed output %s to %s@%s\n", o.Name, b.Repository(image.OutputRepository(img.Name, o.Name)), o.Digest)
	}
	image, err := b.Assemble(ctx, img, platform, dir)
	if err != nil {
		return nil, err
	}
	digest, uploaded, err := b.PushImage(ctx, img.Name, image)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "pushed %s@%s (%d blobs uploaded)\n", b.Repository(img.Name), digest, uploaded)
	return json.Marshal(build.AssembleReport{Digest: digest.String(), Uploaded: uploaded, Outputs: pushedOutputs})
}

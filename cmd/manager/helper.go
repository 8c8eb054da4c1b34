package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/devloop-dev/devloop/internal/image"
	"github.com/devloop-dev/devloop/internal/pods"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/internal/source"
)

// terminationLog is where the kubelet reads a container's termination
// message; the assemble container reports its digest there.
const terminationLog = "/dev/termination-log"

// runHelper is `manager helper <fetch|assemble>`: the steps of a builder
// pod that run the operator's own code, so a pod fetches and pushes exactly
// as the operator would in-process.
func runHelper(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: manager helper fetch|assemble|install|idle|build|test-report|supervise|sync [flags]")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch args[0] {
	case "fetch":
		return helperFetch(ctx, args[1:])
	case "assemble":
		return helperAssemble(ctx, args[1:])
	case "install":
		return helperInstall(args[1:])
	case "idle":
		// A warm builder waits for builds, until its pod stops.
		return helperIdle(ctx, args[1:])
	case "build":
		return helperBuild(ctx, args[1:])
	case "test-report":
		return helperTestReport(ctx, args[1:])
	case "supervise", "sync": // the live update supervisor, as supervisor.Path runs it
		return helperSupervisor(args)
	default:
		return fmt.Errorf("unknown helper %q: want fetch, assemble, install, idle, build, test-report, supervise or sync", args[0])
	}
}

// helperFetch downloads a resolved source into the workspace.
func helperFetch(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("helper fetch", flag.ContinueOnError)
	refJSON := fs.String("ref", "", "the resolved source reference, as JSON")
	dest := fs.String("dest", pods.WorkspaceDir, "directory to fill")
	credsDir := fs.String("credentials", "", "directory of a mounted credentials Secret")
	cacheRoot := fs.String("cache-root", "", "mounted build cache volume")
	cacheDirs := fs.String("cache-dirs", "", "comma-separated directories to create in the cache volume")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := makeCacheDirs(*cacheRoot, *cacheDirs); err != nil {
		return err
	}
	var ref source.Ref
	if err := json.Unmarshal([]byte(*refJSON), &ref); err != nil {
		return fmt.Errorf("--ref: %w", err)
	}
	digest, err := fetchInto(ctx, ref, *credsDir, *dest)
	if err != nil {
		return err
	}
	fmt.Printf("fetched source %s at %s (%s) into %s\n", ref.Source, ref.Revision, digest, *dest)
	return nil
}

// fetchInto downloads ref into dest with the operator's fetch code.
func fetchInto(ctx context.Context, ref source.Ref, credsDir, dest string) (string, error) {
	var creds *source.Credentials
	if credsDir != "" {
		c, err := source.CredentialsFromDir(credsDir)
		if err != nil {
			return "", err
		}
		creds = c
	}
	// The store lives inside the destination's volume, so its content can
	// be moved into place with renames: no copy, symlinks kept as they are.
	store := dest + "/.devloop-store"
	f := &source.Fetcher{Root: store}
	a, err := f.Fetch(ctx, ref, creds)
	if err != nil {
		return "", err
	}
	entries, err := os.ReadDir(a.Dir)
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		if err := os.Rename(a.Dir+"/"+e.Name(), dest+"/"+e.Name()); err != nil {
			return "", fmt.Errorf("moving source %s into %s: %w", ref.Source, dest, err)
		}
	}
	return a.Digest, os.RemoveAll(store)
}

// helperAssemble layers the workspace onto the base for one platform,
// pushes the image by digest (no tag: the operator tags once every
// platform is pushed) and reports the digest in the termination message.
func helperAssemble(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("helper assemble", flag.ContinueOnError)
	imageJSON := fs.String("image", "", "the image to assemble, as JSON")
	platform := fs.String("platform", v1alpha1.DefaultPlatform, "os/arch of the image")
	dir := fs.String("dir", pods.WorkspaceDir, "directory the layers take files from")
	registryJSON := fs.String("registry", "", "the registry, as JSON")
	dockerConfig := fs.String("docker-config", "", "a .dockerconfigjson file with registry credentials")
	report := fs.String("termination-log", terminationLog, "where to write the report")
	outputsJSON := fs.String("outputs", "", "the run step's outputs to pack and push, as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var img image.Spec
	if err := json.Unmarshal([]byte(*imageJSON), &img); err != nil {
		return fmt.Errorf("--image: %w", err)
	}
	out, err := assembleAndPush(ctx, img, *platform, *dir, *registryJSON, *dockerConfig, *outputsJSON, os.Stdout)
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

// makeCacheDirs creates the build cache's subPath directories as this
// (the build's) user, so the build container can write them.
func makeCacheDirs(root, dirs string) error {
	if root == "" || dirs == "" {
		return nil
	}
	for _, d := range strings.Split(dirs, ",") {
		if d == "" || strings.ContainsAny(d, "/\\") || d == "." || d == ".." {
			return fmt.Errorf("--cache-dirs: %q is not a plain directory name", d)
		}
		if err := os.MkdirAll(filepath.Join(root, d), 0o775); err != nil {
			return fmt.Errorf("creating build cache directory: %w", err)
		}
	}
	return nil
}

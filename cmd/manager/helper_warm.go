package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/devloop-dev/devloop/internal/pods"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/internal/source"
)

// helperInstall copies this binary to --to, for a builder image that does
// not have it, and creates the build cache's directories as the build user.
func helperInstall(args []string) error {
	fs := flag.NewFlagSet("helper install", flag.ContinueOnError)
	to := fs.String("to", build.WarmHelper, "where to copy this binary")
	cacheRoot := fs.String("cache-root", "", "mounted build cache volume")
	cacheDirs := fs.String("cache-dirs", "", "comma-separated directories to create in the cache volume")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := makeCacheDirs(*cacheRoot, *cacheDirs); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	in, err := os.Open(self)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := *to + ".tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, *to)
}

// helperBuild is one build in a warm builder: fetch the source into a
// cleared workspace, run the build command there, assemble and push the
// image. The AssembleReport is the last line on stdout; everything else
// goes to stderr. Builds in one pod take turns (a lock file): a restarted
// operator may exec the same build while the first still runs.
func helperBuild(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("helper build", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	refJSON := fs.String("ref", "", "the resolved source reference, as JSON")
	imageJSON := fs.String("image", "", "the image to assemble, as JSON")
	platform := fs.String("platform", v1alpha1.DefaultPlatform, "os/arch of the image")
	registryJSON := fs.String("registry", "", "the registry, as JSON")
	commandJSON := fs.String("command", "", "the build command, as a JSON list")
	dir := fs.String("dir", pods.WorkspaceDir, "the workspace")
	credsDir := fs.String("credentials", "", "directory of a mounted source credentials Secret")
	dockerConfig := fs.String("docker-config", "", "a .dockerconfigjson file with registry credentials")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var ref source.Ref
	if err := json.Unmarshal([]byte(*refJSON), &ref); err != nil {
		return fmt.Errorf("--ref: %w", err)
	}
	var img build.Image
	if err := json.Unmarshal([]byte(*imageJSON), &img); err != nil {
		return fmt.Errorf("--image: %w", err)
	}
	var command []string
	if err := json.Unmarshal([]byte(*commandJSON), &command); err != nil || len(command) == 0 {
		return fmt.Errorf("--command: want a JSON list of at least one word (%v)", err)
	}

	unlock, err := lockWorkspace(*dir)
	if err != nil {
		return err
	}
	defer unlock()
	if err := clearWorkspace(*dir); err != nil {
		return err
	}
	digest, err := fetchInto(ctx, ref, *credsDir, *dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "fetched source %s at %s (%s)\n", ref.Source, ref.Revision, digest)

	cmd := exec.CommandContext(ctx, command[0], command[1:]...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = *dir, os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) && exitErr.ExitCode() > 0 {
			// The build command's own exit code becomes the exec's, so
			// the operator reports it as a Job's would be.
			return commandExitError{code: exitErr.ExitCode(), err: fmt.Errorf("build command %v: %w", command, err)}
		}
		return fmt.Errorf("build command %v: %w", command, err)
	}
	report, err := assembleAndPush(ctx, img, *platform, *dir, *registryJSON, *dockerConfig, os.Stderr)
	if err != nil {
		return err
	}
	_, err = fmt.Printf("%s\n", report)
	return err
}

// commandExitError makes the helper exit with the build command's code.
type commandExitError struct {
	code int
	err  error
}

func (e commandExitError) Error() string { return e.err.Error() }
func (e commandExitError) Unwrap() error { return e.err }

// lockWorkspace takes the workspace's lock file, waiting for a build that
// holds it.
func lockWorkspace(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, ".devloop-lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}

// clearWorkspace removes the previous build's source and outputs, keeping
// the lock file: each build starts from exactly the fetched source, as a
// builder Job does. Caches live on their own volume, not here.
func clearWorkspace(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() == ".devloop-lock" {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("clearing the workspace: %w", err)
		}
	}
	return nil
}

package helper

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/internal/image"
	"github.com/devloop-dev/devloop/internal/pods"
	"github.com/devloop-dev/devloop/internal/source"
)

// installStep copies this binary to --to, for a builder image that does
// not have it, and creates the build cache's directories as the build user.
func installStep(args []string) error {
	fs := flag.NewFlagSet("helper install", flag.ContinueOnError)
	to := fs.String("to", build.WarmHelper, "where to copy this binary")
	cacheRoot := fs.String("cache-root", "", "mounted build cache volume")
	cacheDirs := fs.String("cache-dirs", "", "comma-separated directories to create in the cache volume")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := pods.MakeCacheDirs(*cacheRoot, *cacheDirs); err != nil {
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

// buildStep is one step of a build in a warm builder (--step): fetch
// the source into a cleared workspace (in the agent container, which has
// the credentials), run the build command there (in the build container,
// which has none), assemble and push the image (agent again). The
// AssembleReport is the last line on stdout; everything else goes to
// stderr. Steps of builds in one pod take turns (a lock file): a restarted
// operator may exec a build while an earlier one still runs. The fetch
// step writes --token into the workspace; the later steps refuse a
// workspace that names another build.
func buildStep(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("helper build", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	step := fs.String("step", "", "claim, fetch, run or push")
	token := fs.String("token", "", "names this build across its steps")
	key := fs.String("key", "", "names the build's inputs (claim): a claimed build of the same key is adopted")
	refJSON := fs.String("ref", "", "the resolved source reference, as JSON (fetch)")
	imageJSON := fs.String("image", "", "the image to assemble, as JSON (push)")
	platform := fs.String("platform", v1alpha1.DefaultPlatform, "os/arch of the image (push)")
	registryJSON := fs.String("registry", "", "the registry, as JSON (push)")
	commandJSON := fs.String("command", "", "the build command, as a JSON list (run)")
	envJSON := fs.String("env", "", "the build's environment over the container's, as a JSON list of {name, value} (run)")
	dir := fs.String("dir", pods.WorkspaceDir, "the workspace")
	credsDir := fs.String("credentials", "", "directory of a mounted source credentials Secret (fetch)")
	dockerConfig := fs.String("docker-config", "", "a .dockerconfigjson file with registry credentials (push)")
	timeout := fs.Duration("timeout", 0, "stop the build command after this long (run); 0 never")
	buildLog := fs.String("build-log", "", "a named pipe the build command's output is also written to (run), see idleStep")
	countJSON := fs.String("count-packages", "", "Go packages whose dependencies to count before the command (run), as a JSON list")
	outputsJSON := fs.String("outputs", "", "the run step's outputs to pack and push, as JSON (push)")
	agentState := fs.String("state", "", "a directory only the agent's container mounts, where the push step keeps its result (push); empty: the workspace's")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !plainWord(*token) {
		return errors.New("--token: want a plain word")
	}
	if *step == build.WarmStepClaim {
		// Not under the lock: an earlier build's run step holds it for
		// as long as its command runs, and the claim is what stops it.
		claim, err := claimBuild(*dir, *key, *token, time.Now())
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "build %s claimed the warm builder at %s\n", claim.Token, claim.Started.Format(time.RFC3339))
		out, err := json.Marshal(build.WarmClaim{Token: claim.Token, Started: claim.Started})
		if err != nil {
			return err
		}
		_, err = fmt.Printf("%s\n", out)
		return err
	}
	unlock, err := lockWorkspace(*dir)
	if err != nil {
		return err
	}
	defer unlock()

	switch *step {
	case build.WarmStepFetch:
		var ref source.Ref
		if err := json.Unmarshal([]byte(*refJSON), &ref); err != nil {
			return fmt.Errorf("--ref: %w", err)
		}
		if _, err := claimedBy(*dir, *token); err != nil {
			return err
		}
		if checkBuildToken(*dir, *token) == nil {
			// Exec'd again (the operator restarted): fetched already.
			fmt.Fprintf(os.Stderr, "the workspace holds build %s's source already\n", *token)
			return nil
		}
		if err := clearWorkspace(*dir); err != nil {
			return err
		}
		digest, err := pods.FetchInto(ctx, ref, *credsDir, *dir)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "fetched source %s at %s (%s)\n", ref.Source, ref.Revision, digest)
		return os.WriteFile(filepath.Join(*dir, buildTokenFile), []byte(*token), 0o644)
	case build.WarmStepRun:
		var command []string
		if err := json.Unmarshal([]byte(*commandJSON), &command); err != nil || len(command) == 0 {
			return fmt.Errorf("--command: want a JSON list of at least one word (%v)", err)
		}
		var env []corev1.EnvVar
		if *envJSON != "" {
			if err := json.Unmarshal([]byte(*envJSON), &env); err != nil {
				return fmt.Errorf("--env: %w", err)
			}
		}
		var count []string
		if *countJSON != "" {
			if err := json.Unmarshal([]byte(*countJSON), &count); err != nil {
				return fmt.Errorf("--count-packages: %w", err)
			}
		}
		return runBuildCommand(ctx, runArgs{dir: *dir, token: *token, command: command, env: env, timeout: *timeout, buildLog: *buildLog, countPackages: count})
	case build.WarmStepPush:
		var img image.Spec
		if err := json.Unmarshal([]byte(*imageJSON), &img); err != nil {
			return fmt.Errorf("--image: %w", err)
		}
		// The push result is the agent's word that it pushed: kept where
		// the build container cannot write, or a result the build command
		// planted would be answered as if the agent had pushed.
		resultDir := *dir
		if *agentState != "" {
			resultDir = *agentState
		}
		var done stepResult
		if ok, err := readState(resultDir, resultName(*token, build.WarmStepPush), &done); err != nil || ok {
			// Exec'd again (the operator restarted): the same answer.
			if err == nil && done.Err != "" {
				err = errors.New(done.Err)
			}
			if err == nil {
				_, err = fmt.Printf("%s\n", done.Report)
			}
			return err
		}
		// Only the claimed build's own output is pushed: the workspace
		// holds its source, and no other build has claimed it since.
		if _, err := claimedBy(*dir, *token); err != nil {
			return err
		}
		if err := checkBuildToken(*dir, *token); err != nil {
			return err
		}
		report, err := assembleAndPush(ctx, img, *platform, *dir, *registryJSON, *dockerConfig, *outputsJSON, os.Stderr)
		if err != nil {
			// A registry outage is worth another try: not remembered.
			return err
		}
		if err := writeState(resultDir, resultName(*token, build.WarmStepPush), stepResult{Report: string(report)}); err != nil {
			return err
		}
		_, err = fmt.Printf("%s\n", report)
		return err
	default:
		return fmt.Errorf("--step %q: want claim, fetch, run or push", *step)
	}
}

// buildTokenFile names the build whose source the workspace holds.
const buildTokenFile = ".devloop-build"

// checkBuildToken refuses a workspace another build has fetched into.
func checkBuildToken(dir, token string) error {
	// The build command can replace the file: no symlink followed, and
	// no more read than a token.
	got, err := readSmall(filepath.Join(dir, buildTokenFile), 256)
	if err != nil || string(got) != token {
		return errors.New("the workspace no longer holds this build's source (another build fetched into it since)")
	}
	return nil
}

// ExitError is a build command that exited with Code: the helper exits
// with it too, so the operator reports it as a builder Job's would be.
type ExitError struct {
	Code int
	err  error
}

func (e ExitError) Error() string { return e.err.Error() }
func (e ExitError) Unwrap() error { return e.err }

// lockWorkspace takes the workspace's lock file, waiting for a build that
// holds it.
func lockWorkspace(dir string) (func(), error) {
	// The build command can replace the lock file too: created or
	// opened here, never through a symlink, never a FIFO.
	dirfd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	f, err := openRegularAt(dirfd, ".devloop-lock", syscall.O_CREAT|syscall.O_RDWR, 0o600)
	_ = syscall.Close(dirfd)
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
// the lock file and the builds' state: each build starts from exactly the fetched source, as a
// builder Job does. Caches live on their own volume, not here.
func clearWorkspace(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() == ".devloop-lock" || e.Name() == stateDir {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("clearing the workspace: %w", err)
		}
	}
	return nil
}

// plainWord is a token or key that can be part of a file name.
func plainWord(s string) bool {
	return s != "" && len(s) <= 128 && !strings.ContainsAny(s, "/\\\n\x00") && s != "." && s != ".."
}

// readSmall reads at most max bytes of path, a regular file, not through
// a symlink and without blocking on a FIFO (openRegularAt).
func readSmall(path string, max int64) ([]byte, error) {
	dirfd, err := syscall.Open(filepath.Dir(path), syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: filepath.Dir(path), Err: err}
	}
	defer syscall.Close(dirfd)
	return readAt(dirfd, filepath.Base(path), max)
}

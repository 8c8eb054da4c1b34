//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/cli"
	"github.com/devloop-dev/devloop/internal/devcluster"
	"github.com/devloop-dev/devloop/internal/source"
	"github.com/devloop-dev/devloop/test/builder"
	"github.com/devloop-dev/devloop/test/e2e/fixture"
)

const registry = devcluster.Registry

// busybox is the base and tool image the cases run, from the cluster's
// registry (the nodes reach no other).
const busybox = registry + "/busybox:1.35"

// The restricted Pod Security level's security contexts, for the
// manifests not made by fixture.Deployment (a Job, a chart's templates).
const (
	restrictedPod       = fixture.RestrictedPod
	restrictedContainer = fixture.RestrictedContainer
)

// idleCommand keeps a busybox container running, and lets it stop at once
// when asked.
const idleCommand = `command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 1; done"]`

// newEnv is the environment a case starts from: the namespace's deployer
// ServiceAccount and the source "app" at <ns>/src:dev that it pushes.
func newEnv(ns, name string) *builder.EnvSpec {
	return newEnvIn(registry, ns, name)
}

// newEnvIn is newEnv with its source (and images) in another registry.
func newEnvIn(host, ns, name string) *builder.EnvSpec {
	return builder.Env(ns, name).In(host).ServiceAccount("deployer").AppSource()
}

// sourceDir writes files to a fresh directory, the tree a case pushes.
func sourceDir(t *testing.T, files fixture.Files) string {
	t.Helper()
	dir := t.TempDir()
	writeFiles(t, dir, files)
	return dir
}

// writeFiles writes (or rewrites) files in dir.
func writeFiles(t *testing.T, dir string, files fixture.Files) {
	t.Helper()
	if err := files.WriteTo(dir); err != nil {
		t.Fatal(err)
	}
}

// appSource is the environment's source "app".
func appSource(env *v1alpha1.DevEnvironment) *v1alpha1.OCISource {
	return env.Spec.Sources[0].OCI
}

// pushDir pushes dir as the environment's source "app", packed plainly
// (no prebuilt layers), as a CI job would push it.
func pushDir(t *testing.T, env *v1alpha1.DevEnvironment, dir string) {
	t.Helper()
	src := appSource(env)
	_, err := devcluster.PushSource(context.Background(), dir, src.Repository+":"+src.Tag)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
}

// push pushes dir as the environment's source "app" and asks for a
// reconcile now, as `kubectl devloop push` does; it returns the request.
func push(t *testing.T, env *v1alpha1.DevEnvironment, dir string) string {
	t.Helper()
	pushOnly(t, env, dir)
	return requestReconcile(t, env)
}

// pushOnly pushes dir as the environment's source "app", packed as
// `kubectl devloop push` packs it: the layers of images that copy the
// pushed files are prebuilt for a local registry.
func pushOnly(t *testing.T, env *v1alpha1.DevEnvironment, dir string) {
	t.Helper()
	src := env.Spec.Sources[0]
	g := NewWithT(t)
	img, err := cli.PackSource(dir, env, src.Name, source.CompressionAuto.For(strings.Split(src.OCI.Repository, "/")[0]))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(source.PushArtifact(context.Background(), img, src.OCI.Repository+":"+src.OCI.Tag, source.PushOptions{Insecure: src.OCI.Insecure})).To(Succeed())
}

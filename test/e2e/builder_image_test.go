//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	. "github.com/devloop-dev/devloop/test/builder"
	. "github.com/devloop-dev/devloop/test/e2e/fixture"
)

// versionsMakefile is a Makefile of the kind real projects have: a target
// whose recipe calls git (Volcano's sets its version ldflags that way).
const versionsMakefile = "out/versions.txt:\n" +
	"\tmkdir -p out\n" +
	"\t{ make --version | head -n 1; git --version; } > $@\n"

// TestBuilderImageRunsMakeAndGit is issue 18 item 12 on the real cluster:
// the sample Go builder image (devcluster.GoImage, run by digest) carries make and git
// with their libraries, so a builder Job runs `make --version && git
// --version` and a Makefile target that calls git, as UID 65532 in
// /workspace, and the image built from its output is pushed.
func TestBuilderImageRunsMakeAndGit(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := need(t)
	ns := namespace(t, "e2e-tools")
	env := newEnv(ns, "tools").Registry().Components(Component("tools", Images(Image("versions", Base(busybox),
		Run(&v1alpha1.BuildRun{Image: goImage, Command: []string{"sh", "-c", "make --version && git --version && make out/versions.txt"}}),
		Layer("out/versions.txt", "/versions.txt"))))).Build()
	pushOnly(t, env, sourceDir(t, Files{"Makefile": versionsMakefile}))
	g.Expect(c.Client.Create(ctx, env)).To(Succeed())
	env = waitEnv(t, client.ObjectKeyFromObject(env), 6*time.Minute, false, func(g Gomega, env *v1alpha1.DevEnvironment) {
		readyNow(g, env)
		img := imageOf(env, "versions")
		g.Expect(img).NotTo(BeNil())
		g.Expect(img.Digest).NotTo(BeEmpty())
	})
	img := imageOf(env, "versions")
	g.Expect(img.Build).NotTo(BeNil())
	g.Expect(img.Build.Result).To(Equal(v1alpha1.BuildSucceeded))
	t.Logf("built %s@%s in job %s", img.Repository, img.Digest, img.Build.Job)
}

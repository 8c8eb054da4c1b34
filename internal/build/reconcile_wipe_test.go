package build_test

import (
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// wipeManifest deletes a manifest from the test registry, as a registry
// restarted without storage or garbage-collected would have lost it.
func wipeManifest(g Gomega, repo, digest string) {
	req, err := http.NewRequest(http.MethodDelete, operatortest.Registry.URL+"/v2/"+repo+"/manifests/"+digest, nil)
	g.Expect(err).NotTo(HaveOccurred())
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusAccepted))
}

// expectPushed checks that the registry's repo ("ns/image") holds the
// recorded image and that every tag names it.
func expectPushed(t *testing.T, g Gomega, repo string, img *v1alpha1.ImageStatus) {
	byDigest, err := name.NewDigest(operatortest.Registry.Host+"/"+repo+"@"+img.Digest, name.Insecure)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = remote.Head(byDigest)
	g.Expect(err).NotTo(HaveOccurred(), "the manifest is in the registry")
	for _, tag := range img.Tags {
		g.Expect(operatortest.Registry.TagDigest(t, repo, tag)).To(Equal(img.Digest), "tag %s", tag)
	}
}

// TestWipedRegistryRebuildsRunSteps (issue 17, crossing 9): after the
// registry loses an image built by a run step, the builder Job of the same
// inputs runs again (the digest it reported is gone too) and the new push
// is recorded and tagged; before, the recorded digest was kept and the
// image never came back.
func TestWipedRegistryRebuildsRunSteps(t *testing.T) {
	g := NewWithT(t)
	ns, _ := apiNamespace(t)
	env := amd64APIEnv(ns)
	key := operatortest.CreateEnv(t, env)

	finish := func(job batchv1.Job) { finishBuildJob(t, job, pushRandom(g, ns+"/api"), 1) }
	first := operatortest.WaitForBuilderJob(t, ns, "linux-amd64")
	finish(first)
	env = operatortest.WaitForEnv(t, key, operatortest.ExpectReadyAndCurrent)
	built := *env.Status.Component("api").Image("api")
	expectPushed(t, g, ns+"/api", &built)

	// The registry loses the image.
	wipeManifest(g, ns+"/api", built.Digest)
	operatortest.RequestReconcile(t, env)

	// The same inputs' Job runs again: a new Job of the same name.
	var second batchv1.Job
	g.Eventually(func(g Gomega) {
		jobs := operatortest.BuilderJobs(g, ns)
		g.Expect(jobs).To(HaveKey("linux-amd64"))
		second = jobs["linux-amd64"]
		g.Expect(second.UID).NotTo(Equal(first.UID))
	}, operatortest.Timeout).Should(Succeed())
	g.Expect(second.Name).To(Equal(first.Name))
	env = operatortest.WaitForPhase(t, key, v1alpha1.PhaseBuilding)
	operatortest.ExpectKstatus(t, env, status.InProgressStatus)

	finish(second)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		g.Expect(env.Status.Component("api").Image("api").Digest).NotTo(Equal(built.Digest))
	})
	expectPushed(t, g, ns+"/api", env.Status.Component("api").Image("api"))
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)
}

// TestWipedRegistryRebuildsInWarmBuilders: the same for a warm builder: a
// build of unchanged inputs whose reported image the registry lost is
// exec'd again.
func TestWipedRegistryRebuildsInWarmBuilders(t *testing.T) {
	g := NewWithT(t)
	ns, first := apiNamespace(t)
	env := warmAPIEnv(ns)
	env.Name = "wipe"
	operatortest.WarmExec.Answer(func(command []string, stdout, _ io.Writer) error {
		if !operatortest.IsStep(command, build.WarmStepPush) {
			return nil
		}
		_, err := fmt.Fprintf(stdout, "{\"digest\":%q}\n", pushRandom(g, ns+"/api"))
		return err
	})
	key := operatortest.CreateEnv(t, env)
	operatortest.RunPod(t, ns, build.WarmPodName("wipe", "api", "linux/amd64"))
	env = operatortest.WaitForEnv(t, key, operatortest.ExpectReadyAndCurrent)
	built := *env.Status.Component("api").Image("api")
	g.Expect(operatortest.WarmExec.CallsWith(first.String())).To(Equal(1))

	wipeManifest(g, ns+"/api", built.Digest)
	operatortest.RequestReconcile(t, env)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		g.Expect(env.Status.Component("api").Image("api").Digest).NotTo(Equal(built.Digest))
	})
	g.Expect(operatortest.WarmExec.CallsWith(first.String())).To(Equal(2), "the build of the same inputs ran again")
	expectPushed(t, g, ns+"/api", env.Status.Component("api").Image("api"))
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)
}

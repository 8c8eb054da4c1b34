package liveupdate_test

import (
	"context"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// TestLiveUpdateReadsTheNewBuildFromItsSource: the reconcile that builds
// a new digest in-process and syncs it lists and copies the changed layer
// from the image it assembled, not by downloading that layer back from
// the registry it just pushed it to (twice: once to list it, once to copy
// the file). The image is still in the registry under that digest.
func TestLiveUpdateReadsTheNewBuildFromItsSource(t *testing.T) {
	g := NewWithT(t)
	ns, env, key, v1 := liveEnvWithAPod(t)

	v2 := liveUpdateToV2(t, ns, env, key, v1)
	g.Expect(operatortest.LiveSyncs.Of(ns, "web-a", v2.Digest)[0].Files).To(Equal(map[string]string{"/web": "755:binary v2"}))

	oldLayers := layerDigests(t, v1.Repository+"@"+v1.Digest)
	newOnly := 0
	for d := range layerDigests(t, v2.Repository+"@"+v2.Digest) {
		if oldLayers[d] {
			continue
		}
		newOnly++
		g.Expect(operatortest.Registry.BlobReads(d)).To(BeZero(), "layer %s of the new build, pushed by this reconcile, read back from the registry", d)
	}
	g.Expect(newOnly).To(BeNumerically(">", 0), "the new build has a layer the old one has not (the binary's)")
}

// liveEnvWithAPod is a live-updatable environment Ready, with a pod
// running its template's image (named web-a): where a live update's test
// starts. v1 is the image's status then.
func liveEnvWithAPod(t *testing.T) (string, *v1alpha1.DevEnvironment, client.ObjectKey, v1alpha1.ImageStatus) {
	t.Helper()
	ns, env := deployLiveEnv(t)
	key := client.ObjectKeyFromObject(env)
	env = operatortest.WaitForEnv(t, key, operatortest.ExpectReadyAndCurrent)
	v1 := *env.Status.Component("web").Image("web")
	runningPod(t, ns, "web-a", webDeploymentNow(NewWithT(t), ns).Spec.Template.Spec.Containers[0].Image)
	return ns, env, key, v1
}

// liveUpdateToV2 pushes "binary v2" to liveEnvWithAPod's environment and
// waits for it live updated into web-a, once, status Ready and naming the
// new digest (not v1's) and the file; it returns the image's status then.
func liveUpdateToV2(t *testing.T, ns string, env *v1alpha1.DevEnvironment, key client.ObjectKey, v1 v1alpha1.ImageStatus) v1alpha1.ImageStatus {
	t.Helper()
	pushLive(t, env, "binary v2", "<h1>1</h1>")
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		ist := env.Status.Component("web").Image("web")
		g.Expect(ist.LastUpdate).To(Equal(v1alpha1.UpdateLive), "reason: %s", ist.UpdateReason)
		g.Expect(ist.LiveDigest).To(Equal(ist.Digest))
		g.Expect(ist.Digest).NotTo(Equal(v1.Digest))
		g.Expect(ist.UpdateReason).To(ContainSubstring("/web"))
	})
	v2 := *env.Status.Component("web").Image("web")
	NewWithT(t).Expect(operatortest.LiveSyncs.Of(ns, "web-a", v2.Digest)).To(HaveLen(1))
	return v2
}

// manifestOf is the manifest of the image ref in the test registry (no
// blob read).
func manifestOf(t *testing.T, ref string) *v1.Manifest {
	t.Helper()
	r, err := name.ParseReference(ref, name.Insecure)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	img, err := remote.Image(r, remote.WithContext(context.Background()))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	m, err := img.Manifest()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return m
}

// layerDigests are the layer digests of the image ref in the test
// registry (its manifest read, no blob).
func layerDigests(t *testing.T, ref string) map[string]bool {
	t.Helper()
	m := manifestOf(t, ref)
	out := map[string]bool{}
	for _, l := range m.Layers {
		out[l.Digest.String()] = true
	}
	return out
}

// TestALiveUpdateSyncedWhilePushedIsNotPlannedAgain: the reconcile that
// syncs a new build while it is pushed records that live update once the
// push is done from the decision it synced by: it does not compare the
// images again (which read the pods' image, its config from the
// registry, and the changed layer a second time, on the way to Ready).
func TestALiveUpdateSyncedWhilePushedIsNotPlannedAgain(t *testing.T) {
	g := NewWithT(t)
	ns, env, key, v1 := liveEnvWithAPod(t)
	config := manifestOf(t, v1.Repository+"@"+v1.Digest).Config.Digest.String()
	before := operatortest.Registry.BlobReads(config)

	liveUpdateToV2(t, ns, env, key, v1)
	g.Expect(operatortest.Registry.BlobReads(config)-before).To(Equal(1),
		"the pods' image's config read once for the change (by the sync while pushed), not again after the push")
}

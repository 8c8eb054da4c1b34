package liveupdate_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/timeline"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// TestLiveUpdateSyncsWhileTheImageIsPushed: a live-updatable build is
// synced into the running pod from the image as assembled while it is
// pushed, and status names its digest only once the registry holds it.
// With the image's manifest push refused (503), the pod gets the new
// files (its sync does not wait for the registry) yet the environment is
// not Ready and status still names the old digest, which the registry
// holds; once the registry takes pushes again, the same digest is pushed,
// status names it and the pod is not synced a second time.
func TestLiveUpdateSyncsWhileTheImageIsPushed(t *testing.T) {
	g := NewWithT(t)
	ns, env, key, v1 := liveEnvWithAPod(t)

	// The image's repository path in the registry: /v2/<path>/manifests/.
	repoPath := strings.TrimPrefix(v1.Repository, operatortest.Registry.Host+"/")
	manifests := "/v2/" + repoPath + "/manifests/"
	operatortest.Registry.SetFault(func(r *http.Request) int {
		if r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, manifests) {
			return http.StatusServiceUnavailable
		}
		return 0
	})
	t.Cleanup(func() { operatortest.Registry.SetFault(nil) })

	pushLive(t, env, "binary v2", "<h1>1</h1>")
	var synced string
	g.Eventually(func(g Gomega) {
		synced = podLiveDigest(g, ns, "web-a")
		g.Expect(synced).NotTo(BeEmpty())
		g.Expect(synced).NotTo(Equal(v1.Digest))
	}, operatortest.Timeout).Should(Succeed(), "the pod is synced while the push is refused")
	g.Expect(operatortest.LiveSyncs.Of(ns, "web-a", synced)[0].Files).To(Equal(map[string]string{"/web": "755:binary v2"}))

	// The reconcile that synced it failed on the push, and says so.
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		ready := operatortest.EnvCondition(env, v1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).NotTo(Equal(metav1.ConditionTrue))
		g.Expect(ready.Message).To(ContainSubstring("web"), "Ready: %s", ready.Message)
	})
	ist := env.Status.Component("web").Image("web")
	g.Expect(ist.Digest).To(Equal(v1.Digest), "status names no digest the registry lacks")
	g.Expect(ist.LiveDigest).NotTo(Equal(synced))
	g.Expect(inRegistry(v1.Repository, synced)).To(BeFalse(), "the refused push left no manifest")
	g.Expect(inRegistry(v1.Repository, ist.Digest)).To(BeTrue())

	operatortest.Registry.SetFault(nil)
	operatortest.RequestReconcile(t, env)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		ist := env.Status.Component("web").Image("web")
		g.Expect(ist.Digest).To(Equal(synced))
		g.Expect(ist.LiveDigest).To(Equal(synced))
		g.Expect(ist.LastUpdate).To(Equal(v1alpha1.UpdateLive), "reason: %s", ist.UpdateReason)
	})
	g.Expect(inRegistry(v1.Repository, synced)).To(BeTrue(), "the registry holds what status names")
	g.Expect(operatortest.LiveSyncs.Of(ns, "web-a", synced)).To(HaveLen(1), "the synced pod is not synced again")
	g.Expect(webDeploymentNow(g, ns).Spec.Template.Spec.Containers[0].Image).To(HaveSuffix("@"+v1.Digest), "no rollout")
}

// inRegistry says whether the test registry holds repository@digest.
func inRegistry(repository, digest string) bool {
	ref, err := name.ParseReference(repository+"@"+digest, name.Insecure)
	if err != nil {
		return false
	}
	_, err = remote.Head(ref, remote.WithContext(context.Background()))
	return err == nil
}

// TestTheSyncWhilePushedIsOnTheChangeTimeline: a change synced into the
// pods while its image is pushed shows that sync on the change timeline
// (the LiveUpdate step the push breakdown prints as "synced and
// restarted"), not only the push behind it.
func TestTheSyncWhilePushedIsOnTheChangeTimeline(t *testing.T) {
	g := NewWithT(t)
	ns, env, key, v1 := liveEnvWithAPod(t)

	pushLive(t, env, "binary v2", "<h1>1</h1>")
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		ist := env.Status.Component("web").Image("web")
		g.Expect(ist.Digest).NotTo(Equal(v1.Digest))
		g.Expect(ist.LastUpdate).To(Equal(v1alpha1.UpdateLive), "reason: %s", ist.UpdateReason)
	})
	synced := env.Status.Component("web").Image("web").Digest
	g.Expect(operatortest.LiveSyncs.Of(ns, "web-a", synced)).To(HaveLen(1))
	g.Eventually(func(g Gomega) {
		cm := &corev1.ConfigMap{}
		g.Expect(operatortest.Admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: timeline.ConfigMapName(env.Name)}, cm)).To(Succeed())
		changes, err := timeline.Decode(cm)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(changes).NotTo(BeEmpty())
		newest := changes[0]
		g.Expect(newest.Result).To(Equal(timeline.Serving), "newest change: %+v", newest)
		var names []timeline.StepName
		for _, s := range newest.Steps {
			names = append(names, s.Name)
		}
		g.Expect(names).To(ContainElements(timeline.Assemble, timeline.Push, timeline.LiveUpdate), "steps of the change: %+v", newest.Steps)
	}, operatortest.Timeout).Should(Succeed())
}

package deploy_test

import (
	"context"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// debugPatches are a debug build's patches, OCM-style: the manager's log
// level and a securityContext by strategic merge (the proxy sidecar
// stays), and the hook's args by JSON6902.
var debugPatches = []v1alpha1.Patch{
	{Patch: `apiVersion: apps/v1
kind: Deployment
metadata: {name: site}
spec:
  template:
    spec:
      containers:
      - name: manager
        args: [--leader-elect, --zap-log-level=debug]
        securityContext: {allowPrivilegeEscalation: false}
`},
	{Target: &v1alpha1.PatchTarget{Group: "batch", Kind: "Job", Name: ".*-migrate"},
		Patch: "- {op: add, path: /spec/template/spec/containers/0/args/-, value: --dry-run=false}\n"},
}

// TestHelmPatchesReachTheHookJobAndItRunsTheBuiltImage: a chart's
// pre-install hook Job runs the image the environment built, by digest,
// with its patched args (Helm 3 post-renders no hook); the Deployment
// gets its debug patch with the sidecar kept; skipCRDs leaves the chart's
// CRD out although the deployer may create CRDs.
func TestHelmPatchesReachTheHookJobAndItRunsTheBuiltImage(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := operatortest.DeployNamespace(t)
	operatortest.AllowCRDs(t, ns, "deployer")
	pushWebSource(t, ns, operatortest.DirFiles(t, "testdata/patches/chart", "chart"))
	key := operatortest.CreateEnv(t, webHelmEnv(ns, &v1alpha1.HelmSpec{
		Chart:       v1alpha1.ChartRef{Source: "app", Path: "chart"},
		ReleaseName: "site",
		SkipCRDs:    true,
		Patches:     debugPatches,
	}))

	// Helm waits for the hook; the build is in status before it runs.
	env := operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.Component("web").Image("web")).NotTo(BeNil())
		g.Expect(env.Status.Component("web").Image("web").Digest).NotTo(BeEmpty())
	})
	pinned := operatortest.Registry.Host + "/" + ns + "/web@" + env.Status.Component("web").Image("web").Digest
	job := &batchv1.Job{}
	g.Eventually(func() error {
		return operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "site-migrate"}, job)
	}, operatortest.Timeout).Should(Succeed(), "the pre-install hook runs")
	g.Expect(job.Spec.Template.Spec.Containers[0].Image).To(Equal(pinned), "the hook runs the built image by digest")
	g.Expect(job.Spec.Template.Spec.Containers[0].Args).To(Equal([]string{"migrate", "--dry-run=false"}))
	operatortest.EndJob(t, ns, "site-migrate", true)

	d := &appsv1.Deployment{}
	g.Eventually(func() error { return operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "site"}, d) }, operatortest.Timeout).Should(Succeed())
	manager := d.Spec.Template.Spec.Containers[0]
	g.Expect(manager.Image).To(Equal(pinned))
	g.Expect(manager.Args).To(Equal([]string{"--leader-elect", "--zap-log-level=debug"}))
	g.Expect(manager.SecurityContext).NotTo(BeNil())
	g.Expect(*manager.SecurityContext.AllowPrivilegeEscalation).To(BeFalse())
	g.Expect(d.Spec.Template.Spec.Containers).To(HaveLen(2), "the sidecar is merged by name, not replaced")
	g.Expect(d.Spec.Template.Spec.Containers[1].Image).To(Equal("busybox:1.36"))

	env = rolledOut(t, key, "site")
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	err := operatortest.Admin.Get(ctx, client.ObjectKey{Name: "gadgets.patched.devloop.dev"}, crd)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "skipCRDs: crds/ not installed (got %v)", err)

	// A steady environment does not patch again: no new revision.
	_ = operatortest.RequestReconcile(t, env)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		g.Expect(env.Status.Component("web").Release.Revision).To(Equal(1))
	})
}

// TestManifestsPatchThatMatchesNothingStallsNamingIt: a manifests
// component whose second patch matches no object stalls naming it and
// applies nothing; without it, the first patch's args reach the
// Deployment, whose image is still pinned.
func TestManifestsPatchThatMatchesNothingStallsNamingIt(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := operatortest.DeployNamespace(t)
	pushWebSource(t, ns, webDeployment)
	env := webManifestsEnv(ns, "deploy")
	env.Spec.Components[0].Manifests.Patches = []v1alpha1.Patch{
		{Target: &v1alpha1.PatchTarget{Kind: "Deployment", Name: "web"},
			Patch: "- {op: add, path: /spec/template/spec/containers/0/args, value: [--v=4]}\n"},
		{Patch: "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: web}\nspec: {replicas: 2}\n"},
	}
	key := operatortest.CreateEnv(t, env)

	env = operatortest.WaitForStalled(t, key, "", "spec.components[0].manifests.patches[1]: matches no rendered object")
	operatortest.ExpectKstatus(t, env, status.FailedStatus)
	err := operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &appsv1.Deployment{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "nothing applied (got %v)", err)

	operatortest.EditSpec(t, key, func(cur *v1alpha1.DevEnvironment) {
		cur.Spec.Components[0].Manifests.Patches = cur.Spec.Components[0].Manifests.Patches[:1]
	})
	d := &appsv1.Deployment{}
	g.Eventually(func() error { return operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, d) }, operatortest.Timeout).Should(Succeed())
	g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(Equal([]string{"--v=4"}))
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.Component("web").Image("web")).NotTo(BeNil())
	})
	g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal(operatortest.Registry.Host + "/" + ns + "/web@" + env.Status.Component("web").Image("web").Digest))
	env = rolledOut(t, key, "web")
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)
}

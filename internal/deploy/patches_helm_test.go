package deploy

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/deploy/helm"
	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/internal/testenv"
)

// These tests run deploy's patches through Helm's rendering of a release
// (helm/render.go), hooks included.

// testChart is one of the deploy engine's test charts.
func testChart(t *testing.T, name string) *helm.Chart {
	t.Helper()
	ch, err := helm.LoadChartDir(testenv.DeployCharts(), name)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

const ctlRef = "registry.test:5000/team/ctl@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// pinCtl pins the chart's ctl image, as the engine pins built images.
func pinCtl(objs []*unstructured.Unstructured) error {
	_, err := RewriteImages(objs, []BuiltImage{{Name: "ctl", Repositories: []string{"ctl"}, Reference: ctlRef}})
	return err
}

// hookJob waits for the hook Job Helm creates (one other than skip, a
// UID of a previous run) and returns it.
func hookJob(t *testing.T, key client.ObjectKey, skip types.UID) *batchv1.Job {
	t.Helper()
	job := &batchv1.Job{}
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), key, job)).To(Succeed())
		g.Expect(job.UID).NotTo(Equal(skip))
	}, time.Minute, 50*time.Millisecond).Should(Succeed())
	return job
}

// completeJob does what the Job controller would: envtest runs none.
func completeJob(t *testing.T, job *batchv1.Job) {
	t.Helper()
	start := metav1.NewTime(time.Now().Add(-time.Second))
	now := metav1.Now()
	job.Status = batchv1.JobStatus{StartTime: &start, CompletionTime: &now, Succeeded: 1, Conditions: []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now}}}
	if err := k8s.Status().Update(context.Background(), job); err != nil {
		t.Fatal(err)
	}
}

type releaseResult struct {
	out helm.Outcome
	err error
}

func reconcileAsync(ctx context.Context, req helm.ReleaseRequest) <-chan releaseResult {
	ch := make(chan releaseResult, 1)
	go func() {
		out, err := helm.ReconcileRelease(ctx, req)
		ch <- releaseResult{out, err}
	}()
	return ch
}

// TestHookJobIsPinnedAndPatched: Helm 3 does not post-render hooks, yet
// the pre-install hook Job runs the built image by digest and carries
// its patch, a patch that matches only the hook is not "unmatched", the
// manifest's Deployment is patched too, skipCRDs leaves crds/ out, and
// an upgrade runs the hook again with the patch applied once.
func TestHookJobIsPinnedAndPatched(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, k8s, "helm-")
	patches, err := CompilePatches("spec.components[0].helm.patches", []v1alpha1.Patch{
		{Target: &v1alpha1.PatchTarget{Group: "batch", Kind: "Job", Name: ".*-migrate"},
			Patch: "- {op: add, path: /spec/template/spec/containers/0/args/-, value: --dry-run=false}"},
		{Patch: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: rel-app}\nspec: {template: {spec: {containers: [{name: app, args: [serve, --debug]}]}}}"},
	}, ns)
	g.Expect(err).NotTo(HaveOccurred())
	req := helm.ReleaseRequest{
		Configs: helm.NewConfigFactory(cfg, ""), ReleaseName: "rel", Namespace: ns, Timeout: 2 * time.Minute,
		Chart: testChart(t, "hookjob"), Values: map[string]any{}, Patches: patches, Mutate: pinCtl, SkipCRDs: true,
	}

	done := reconcileAsync(ctx, req)
	jobKey := client.ObjectKey{Namespace: ns, Name: "rel-migrate"}
	job := hookJob(t, jobKey, "")
	c := job.Spec.Template.Spec.Containers[0]
	g.Expect(c.Image).To(Equal(ctlRef), "the hook runs the built image by digest")
	g.Expect(c.Args).To(Equal([]string{"migrate", "--dry-run=false"}))
	completeJob(t, job)
	res := <-done
	g.Expect(res.err).NotTo(HaveOccurred())
	g.Expect(res.out.Actions).To(Equal([]helm.Action{helm.ActionInstall}))

	var dep appsv1.Deployment
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "rel-app"}, &dep)).To(Succeed())
	g.Expect(dep.Spec.Template.Spec.Containers[0].Image).To(Equal(ctlRef))
	g.Expect(dep.Spec.Template.Spec.Containers[0].Args).To(Equal([]string{"serve", "--debug"}))
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	err = k8s.Get(ctx, client.ObjectKey{Name: "gadgets.hookjob.devloop.dev"}, crd)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "skipCRDs: the chart's crds/ are not installed, got %v", err)

	// The stored revision holds the hook as it ran.
	hcfg, err := req.Configs(ns)
	g.Expect(err).NotTo(HaveOccurred())
	rls, err := helm.LastRelease(hcfg, "rel")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rls.Hooks).To(HaveLen(1))
	g.Expect(rls.Hooks[0].Manifest).To(ContainSubstring(ctlRef))

	// An upgrade renders anew: the hook's add is applied once again, not
	// on top of the last one.
	req.Values = map[string]any{"version": "2"}
	done = reconcileAsync(ctx, req)
	job = hookJob(t, jobKey, job.UID)
	g.Expect(job.Spec.Template.Spec.Containers[0].Args).To(Equal([]string{"migrate", "--dry-run=false"}))
	g.Expect(job.Spec.Template.Spec.Containers[0].Image).To(Equal(ctlRef))
	completeJob(t, job)
	res = <-done
	g.Expect(res.err).NotTo(HaveOccurred())
	g.Expect(res.out.Actions).To(Equal([]helm.Action{helm.ActionUpgrade}))
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "rel-app"}, &dep)).To(Succeed())
	g.Expect(dep.Spec.Template.Spec.Containers[0].Args).To(Equal([]string{"serve", "--debug"}))
}

// TestPatchMatchingNothingStopsTheReleaseBeforeAnythingIsCreated: the
// check covers manifest and hooks, and fails before Helm creates or
// stores anything.
func TestPatchMatchingNothingStopsTheReleaseBeforeAnythingIsCreated(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, k8s, "helm-")
	patches, err := CompilePatches("spec.components[3].helm.patches", []v1alpha1.Patch{
		{Target: &v1alpha1.PatchTarget{Kind: "Deployment"}, Patch: "metadata: {annotations: {a: b}}"},
		{Target: &v1alpha1.PatchTarget{Kind: "StatefulSet"}, Patch: "metadata: {annotations: {a: b}}"},
	}, ns)
	g.Expect(err).NotTo(HaveOccurred())
	req := helm.ReleaseRequest{
		Configs: helm.NewConfigFactory(cfg, ""), ReleaseName: "nomatch", Namespace: ns, Timeout: time.Minute,
		Chart: testChart(t, "hookjob"), Values: map[string]any{}, Patches: patches, Mutate: pinCtl, SkipCRDs: true,
	}
	out, err := helm.ReconcileRelease(ctx, req)
	g.Expect(err).To(MatchError(ContainSubstring("spec.components[3].helm.patches[1]: matches no rendered object")))
	g.Expect(fault.IsPermanent(err)).To(BeTrue())
	g.Expect(out.Release.Revision).To(BeZero(), "nothing stored")
	var jobs batchv1.JobList
	g.Expect(k8s.List(ctx, &jobs, client.InNamespace(ns))).To(Succeed())
	g.Expect(jobs.Items).To(BeEmpty(), "no hook ran")
	var deps appsv1.DeploymentList
	g.Expect(k8s.List(ctx, &deps, client.InNamespace(ns))).To(Succeed())
	g.Expect(deps.Items).To(BeEmpty())
}

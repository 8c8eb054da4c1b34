package deploy

import (
	"context"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

func TestReadyDeploymentOnceAvailable(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	createNamespace(t, "ready-deploy")
	objs, err := Render(testdata, []string{"kustomize/base"}, "ready-deploy", k8s.RESTMapper())
	g.Expect(err).NotTo(HaveOccurred())
	inv, err := Apply(ctx, k8s, objs, ApplyOptions{Environment: "ready-env", Component: "api"})
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(notReadyOf(g, inv.Entries)).To(ConsistOf(HavePrefix("deployments.apps/api: ")))

	// What the deployment controller and kubelet would report.
	d := &appsv1.Deployment{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "ready-deploy", Name: "api"}, d)).To(Succeed())
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable", LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now()},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable", LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now()},
		},
	}
	g.Expect(k8s.Status().Update(ctx, d)).To(Succeed())

	g.Expect(notReadyOf(g, inv.Entries)).To(BeEmpty())
	g.Expect(kstatusOf(g, inv.Entries[0])).To(Equal(status.CurrentStatus))
}

func TestReadyJobOnlyWhenComplete(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	createNamespace(t, "ready-job")
	job := fromYAML(t, `
apiVersion: batch/v1
kind: Job
metadata: {name: admission-init, namespace: ready-job}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: init, image: busybox}]`)
	inv, err := Apply(ctx, k8s, []*unstructured.Unstructured{job}, ApplyOptions{Environment: "ready-env", Component: "init"})
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(notReadyOf(g, inv.Entries)).To(ConsistOf("jobs.batch/admission-init: Job not started"))

	// Running: kstatus calls it Current, devloop still waits.
	j := &batchv1.Job{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "ready-job", Name: "admission-init"}, j)).To(Succeed())
	start := metav1.NewTime(time.Now().Add(-time.Minute))
	j.Status = batchv1.JobStatus{StartTime: &start, Active: 1, Ready: ptr(int32(0))}
	g.Expect(k8s.Status().Update(ctx, j)).To(Succeed())
	g.Expect(kstatusOf(g, inv.Entries[0])).To(Equal(status.CurrentStatus))
	g.Expect(notReadyOf(g, inv.Entries)).To(ConsistOf(ContainSubstring("Job in progress")))

	// Complete, as the job controller reports it.
	now := metav1.Now()
	j.Status = batchv1.JobStatus{StartTime: &start, CompletionTime: &now, Succeeded: 1, Ready: ptr(int32(0)),
		Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
		}}
	g.Expect(k8s.Status().Update(ctx, j)).To(Succeed())
	g.Expect(notReadyOf(g, inv.Entries)).To(BeEmpty())
	g.Expect(kstatusOf(g, inv.Entries[0])).To(Equal(status.CurrentStatus))
}

func TestReadyCustomResourceCondition(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	// TestApplyPlainDirectory may run in any order: apply the set here too.
	objs := renderPlain(t, testdata+"/plain")
	_, err := Apply(ctx, k8s, objs, shopOpts)
	g.Expect(err).NotTo(HaveOccurred())
	widget := ObjRef{Group: "example.dev", Version: "v1", Kind: "Widget", Namespace: "shop", Name: "big"}
	missing := ObjRef{Version: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "missing"}

	setReady := func(s, msg string) {
		w := &unstructured.Unstructured{}
		w.SetGroupVersionKind(widget.GroupVersionKind())
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "big"}, w)).To(Succeed())
		g.Expect(unstructured.SetNestedSlice(w.Object, []any{map[string]any{"type": "Ready", "status": s, "reason": "Test", "message": msg}}, "status", "conditions")).To(Succeed())
		g.Expect(k8s.Status().Update(ctx, w)).To(Succeed())
	}
	setReady("False", "waiting for gears")
	notReady, err := Ready(ctx, k8s, []ObjRef{widget, missing})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(notReady).To(ConsistOf("widgets.example.dev/big: waiting for gears", "configmaps/missing: not found"))
	g.Expect(kstatusOf(g, widget)).To(Equal(status.InProgressStatus))

	setReady("True", "")
	notReady, err = Ready(ctx, k8s, []ObjRef{widget})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(notReady).To(BeEmpty())
	g.Expect(kstatusOf(g, widget)).To(Equal(status.CurrentStatus))
}

// A custom resource whose Ready condition has no message (GPU Operator's
// ClusterPolicy on a node without GPUs) is described by its own reason,
// the Error condition's, not only kstatus's "InProgress"; left out of the
// wait by a health spec, it is counted and described, not waited for.
func TestReadyCustomResourceOwnReasonAndHealthIgnore(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	// The Widget CRD comes with the plain set (TestApplyPlainDirectory
	// may run in any order).
	_, err := Apply(ctx, k8s, renderPlain(t, testdata+"/plain"), shopOpts)
	g.Expect(err).NotTo(HaveOccurred())
	createNamespace(t, "ready-reason")
	w := fromYAML(t, "apiVersion: example.dev/v1\nkind: Widget\nmetadata: {name: policy, namespace: ready-reason}\nspec: {size: 1}\n")
	g.Expect(k8s.Create(ctx, w)).To(Succeed())
	g.Expect(unstructured.SetNestedSlice(w.Object, []any{
		map[string]any{"type": "Ready", "status": "False", "reason": "Error", "message": ""},
		map[string]any{"type": "Error", "status": "True", "reason": "OperandNotReady", "message": "ClusterPolicy is not ready,\n states not ready: [state-driver]"},
	}, "status", "conditions")).To(Succeed())
	g.Expect(unstructured.SetNestedField(w.Object, "notReady", "status", "state")).To(Succeed())
	g.Expect(k8s.Status().Update(ctx, w)).To(Succeed())
	widget := ObjRef{Group: "example.dev", Version: "v1", Kind: "Widget", Namespace: "ready-reason", Name: "policy"}
	line := "widgets.example.dev/policy: InProgress: OperandNotReady: ClusterPolicy is not ready, states not ready: [state-driver]"

	r, err := Check(ctx, k8s, []ObjRef{widget})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.NotReady).To(ConsistOf(line))
	g.Expect(kstatusOf(g, widget)).To(Equal(status.InProgressStatus))

	for _, health := range []*v1alpha1.HealthSpec{
		{Ignore: []v1alpha1.HealthIgnore{{Kind: "Widget"}}},
		{Ignore: []v1alpha1.HealthIgnore{{Kind: "Widget", Group: "example.dev", Name: "policy"}}},
		{Wait: ptr(false)},
	} {
		r, err := CheckHealth(ctx, k8s, []ObjRef{widget}, health)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.NotReady).To(BeEmpty(), "health %+v", health)
		g.Expect(r.NotWaited).To(Equal(1))
		g.Expect(r.NotWaitedOn).To(ConsistOf(line))
	}
	// Another name or group is still waited for.
	for _, ignore := range []v1alpha1.HealthIgnore{{Kind: "Widget", Name: "other"}, {Kind: "Widget", Group: "other.dev"}, {Kind: "widget"}} {
		r, err := CheckHealth(ctx, k8s, []ObjRef{widget}, &v1alpha1.HealthSpec{Ignore: []v1alpha1.HealthIgnore{ignore}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.NotReady).To(ConsistOf(line), "ignore %+v", ignore)
		g.Expect(r.NotWaited).To(BeZero())
	}

	// Without any condition message, the reason and then status.state.
	g.Expect(unstructured.SetNestedSlice(w.Object, []any{
		map[string]any{"type": "Ready", "status": "False", "reason": "Error", "message": ""},
	}, "status", "conditions")).To(Succeed())
	g.Expect(k8s.Status().Update(ctx, w)).To(Succeed())
	g.Expect(notReadyOf(g, []ObjRef{widget})).To(ConsistOf("widgets.example.dev/policy: InProgress: Ready Error"))
}

// A Deployment whose pods are refused (Pod Security, a quota, a webhook)
// has no pods to read: "Replicas: 0/1" alone hid why Dynamo's operator
// never started in a namespace enforcing restricted. Its ReplicaFailure
// condition says why, and the waiting line carries it.
func TestReadyDeploymentSaysWhyItsPodsWereNotCreated(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	createNamespace(t, "ready-refused")
	objs, err := Render(testdata, []string{"kustomize/base"}, "ready-refused", k8s.RESTMapper())
	g.Expect(err).NotTo(HaveOccurred())
	inv, err := Apply(ctx, k8s, objs, ApplyOptions{Environment: "ready-env", Component: "api"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(notReadyOf(g, inv.Entries)).To(ConsistOf(Not(ContainSubstring("forbidden"))))

	refusal := `pods "api-7d858d99b8-btfqn" is forbidden: violates PodSecurity "restricted:latest": seccompProfile (pod or container "api" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")`
	d := &appsv1.Deployment{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "ready-refused", Name: "api"}, d)).To(Succeed())
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetCreated", LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now()},
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse, Reason: "MinimumReplicasUnavailable", LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now()},
			{Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate", Message: refusal, LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now()},
		},
	}
	g.Expect(k8s.Status().Update(ctx, d)).To(Succeed())
	g.Expect(notReadyOf(g, inv.Entries)).To(ConsistOf(And(HavePrefix("deployments.apps/api: "),
		ContainSubstring("pods not created (FailedCreate): "+refusal))))
}

package operatortest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/message"
	"github.com/devloop-dev/devloop/internal/testenv"
)

// WaitForEnv reads the environment until check passes, and returns it.
func WaitForEnv(t testing.TB, key client.ObjectKey, check func(g Gomega, env *v1alpha1.DevEnvironment)) *v1alpha1.DevEnvironment {
	t.Helper()
	env := &v1alpha1.DevEnvironment{}
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(Admin.Get(context.Background(), key, env)).To(Succeed())
		check(g, env)
	}, Timeout, 100*time.Millisecond).Should(Succeed())
	ExpectShortSummary(t, env)
	return env
}

// ExpectShortSummary: the STATUS column (status.summary) says Ready's
// message in at most message.MaxSummary bytes; every environment a test
// reads or checks passes here, so every message the tests produce is
// checked.
func ExpectShortSummary(t testing.TB, env *v1alpha1.DevEnvironment) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(len(env.Status.Summary)).To(BeNumerically("<=", message.MaxSummary), "status.summary: %s", env.Status.Summary)
	if ready := EnvCondition(env, v1alpha1.ConditionReady); ready != nil && ready.Message != "" {
		g.Expect(env.Status.Summary).NotTo(BeEmpty(), "status.summary of Ready: %s", ready.Message)
	}
}

// ExpectKstatus is the conformance check every reconciler test ends with:
// kstatus, as Flux computes it, must read the environment as want.
func ExpectKstatus(t testing.TB, env *v1alpha1.DevEnvironment, want status.Status) {
	t.Helper()
	res, err := testenv.Kstatus(env)
	g := NewWithT(t)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Status).To(Equal(want), "kstatus message: %s", res.Message)
	ExpectShortSummary(t, env)
}

// EnvCondition is the environment's condition of type typ, or nil.
func EnvCondition(env *v1alpha1.DevEnvironment, typ string) *metav1.Condition {
	return meta.FindStatusCondition(env.Status.Conditions, typ)
}

// ExpectReadyAndCurrent: the environment is Ready for its current
// generation.
func ExpectReadyAndCurrent(g Gomega, env *v1alpha1.DevEnvironment) {
	g.Expect(env.Status.ObservedGeneration).To(Equal(env.Generation))
	ready := EnvCondition(env, v1alpha1.ConditionReady)
	g.Expect(ready).NotTo(BeNil())
	g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), "Ready: %s", ready.Message)
}

// RequestReconcile sets the reconcile-request annotation, as `kubectl
// devloop push` does, and returns its value.
func RequestReconcile(t testing.TB, env *v1alpha1.DevEnvironment) string {
	t.Helper()
	g := NewWithT(t)
	value := time.Now().Format(time.RFC3339Nano)
	g.Eventually(func() error {
		cur := &v1alpha1.DevEnvironment{}
		if err := Admin.Get(context.Background(), client.ObjectKeyFromObject(env), cur); err != nil {
			return err
		}
		patch := client.MergeFrom(cur.DeepCopy())
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Annotations[v1alpha1.ReconcileRequestAnnotation] = value
		return Admin.Patch(context.Background(), cur, patch)
	}, Timeout).Should(Succeed())
	return value
}

// MarkDeploymentAvailable writes the status a Deployment controller would
// once its pods are up (envtest runs no controllers).
func MarkDeploymentAvailable(t testing.TB, ns, name string) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		d := &appsv1.Deployment{}
		if err := Admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
			return err
		}
		n := ptr.Deref(d.Spec.Replicas, 1)
		d.Status = appsv1.DeploymentStatus{
			ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n,
			Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
			},
		}
		return Admin.Status().Update(context.Background(), d)
	}, Timeout).Should(Succeed())
}

// ExpectGone waits until obj is deleted.
func ExpectGone(t testing.TB, obj client.Object) {
	t.Helper()
	NewWithT(t).Eventually(func() bool {
		return apierrors.IsNotFound(Admin.Get(context.Background(), client.ObjectKeyFromObject(obj), obj))
	}, Timeout).Should(BeTrue(), "%T %s still there", obj, obj.GetName())
}

// WaitForJob waits for a Job to exist.
func WaitForJob(t testing.TB, ns, name string) *batchv1.Job {
	t.Helper()
	job := &batchv1.Job{}
	NewWithT(t).Eventually(func() error {
		return Admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, job)
	}, Timeout).Should(Succeed())
	return job
}

// Terminated is the status of a container that exited with code, as the
// kubelet reports it.
func Terminated(name string, code int32, message string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: message,
		Reason: map[bool]string{true: "Completed", false: "Error"}[code == 0]}}}
}

// ExpectEvent waits for an event in ns with the reason and a note
// containing text.
func ExpectEvent(t testing.TB, ns, reason, text string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		list := &eventsv1.EventList{}
		g.Expect(Admin.List(context.Background(), list, client.InNamespace(ns))).To(Succeed())
		var notes []string
		for _, e := range list.Items {
			if e.Reason == reason {
				notes = append(notes, e.Note)
			}
		}
		g.Expect(notes).To(ContainElement(ContainSubstring(text)), "events %s", reason)
	}, Timeout).Should(Succeed())
}

// ExpectEnvGone waits until the environment ns/name is deleted, its
// finalizer done.
func ExpectEnvGone(t testing.TB, ns, name string) {
	t.Helper()
	ExpectGone(t, Env(ns, name).Obj())
}

// PhaseOf is the component's phase, or "" before it has a status entry.
func PhaseOf(env *v1alpha1.DevEnvironment, name string) v1alpha1.ComponentPhase {
	if c := env.Status.Component(name); c != nil {
		return c.Phase
	}
	return ""
}

// ConditionsSummary is the environment's conditions as Type=Status,
// for failure messages.
func ConditionsSummary(env *v1alpha1.DevEnvironment) string {
	var out []string
	for _, c := range env.Status.Conditions {
		out = append(out, c.Type+"="+string(c.Status))
	}
	return strings.Join(out, ",")
}

// RunPod waits for the pod ns/name and writes the status the kubelet
// would once every container of it runs, not Ready (envtest runs no
// pods): how a test starts a warm builder.
func RunPod(t testing.TB, ns, name string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{}
	NewWithT(t).Eventually(func() error {
		return Admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pod)
	}, Timeout).Should(Succeed())
	testenv.MarkPodRunning(t, Admin, pod, false)
	return pod
}

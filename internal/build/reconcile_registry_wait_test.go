package build_test

import (
	"bufio"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/internal/build/helper"
	"github.com/devloop-dev/devloop/internal/pods"
	"github.com/devloop-dev/devloop/internal/testregistry"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// TestBuilderJobWaitsForTheRegistryInItsPod is issue 43's heal time for a
// builder Job: the registry stops after the build command ran, so the
// assemble container (the real helper step, with the Job's arguments)
// waits for it in its pod. Meanwhile the environment reads Waiting for
// the registry, naming the container and the Job, and the Job is left
// running (not replaced: its build is done); once the registry answers,
// the same container pushes and the environment is Ready with no new
// Job, so no second run of the build command.
func TestBuilderJobWaitsForTheRegistryInItsPod(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	o := builderJobOnItsOwnRegistry(t)
	ns, key, reg, job := o.ns, o.key, o.reg, o.job

	// The kubelet: the build command has run; the assemble container runs.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: job.Name + "-" + string(job.UID)[:5],
			Labels:          map[string]string{batchv1.JobNameLabel: job.Name},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(&job, batchv1.SchemeGroupVersion.WithKind("Job"))}},
		Spec: job.Spec.Template.Spec,
	}
	g.Expect(operatortest.Admin.Create(ctx, pod)).To(Succeed())
	pod.Status.Phase = corev1.PodRunning
	pod.Status.InitContainerStatuses = []corev1.ContainerStatus{
		operatortest.Terminated(pods.ContainerFetch, 0, ""), operatortest.Terminated(build.ContainerBuild, 0, "")}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: build.ContainerAssemble,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}
	g.Expect(operatortest.Admin.Status().Update(ctx, pod)).To(Succeed())

	reg.Stop()
	assembled := runAssembleLogging(t, job, func(log string) { operatortest.PodLogs.Set(ns, pod.Name, build.ContainerAssemble, log) })

	env := waitingForTheRegistry(t, key, "registry was unavailable to container assemble of builder job "+job.Name, reg.Host)
	g.Expect(meta.FindStatusCondition(env.Status.Conditions, v1alpha1.ConditionReconciling).Message).NotTo(ContainSubstring("down for"), "status changes on every try")
	t.Logf("while the registry is down: %s", meta.FindStatusCondition(env.Status.Conditions, v1alpha1.ConditionReconciling).Message)
	var still batchv1.Job
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKeyFromObject(&job), &still)).To(Succeed())
	g.Expect(still.UID).To(Equal(job.UID), "the running Job was replaced")

	returned := o.back(t)
	var assemble corev1.ContainerStatus
	select {
	case assemble = <-assembled:
	case <-time.After(2 * time.Minute):
		t.Fatal("the assemble container did not push within 2 minutes of the registry's return")
	}
	g.Expect(assemble.State.Terminated.ExitCode).To(BeZero(), assemble.State.Terminated.Message)
	t.Logf("pushed %s after the registry's return", time.Since(returned).Round(100*time.Millisecond))
	g.Expect(operatortest.Admin.Delete(ctx, pod)).To(Succeed())
	finishJob(t, &still,
		[]corev1.ContainerStatus{operatortest.Terminated(pods.ContainerFetch, 0, ""), operatortest.Terminated(build.ContainerBuild, 0, "")},
		[]corev1.ContainerStatus{assemble}, true)
	env = operatortest.WaitForEnv(t, key, operatortest.ExpectReadyAndCurrent)
	t.Logf("Ready %s after the registry's return", time.Since(returned).Round(100*time.Millisecond))
	st := env.Status.Component("api").Image("api")
	g.Expect(st.Build.Job).To(Equal(job.Name))
	testregistry.Pull(t, st.Repository+"@"+st.Digest)
	jobs := &batchv1.JobList{}
	g.Expect(operatortest.Admin.List(ctx, jobs, client.InNamespace(ns))).To(Succeed())
	for _, j := range jobs.Items {
		g.Expect(j.UID).To(Equal(job.UID), "a second builder job ran the build command again")
	}
}

// runAssembleLogging starts the real assemble step of job as its container
// would, its output (what the kubelet would keep as the container's log)
// given to logged as it grows; the container's end comes on the channel.
func runAssembleLogging(t *testing.T, job batchv1.Job, logged func(string)) <-chan corev1.ContainerStatus {
	t.Helper()
	args, report := assembleInvocation(t, job)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	t.Cleanup(func() { os.Stdout = stdout })
	go func() {
		var log strings.Builder
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			logged(log.String())
		}
	}()
	done := make(chan corev1.ContainerStatus, 1)
	go func() {
		err := helper.Run(context.Background(), args)
		os.Stdout = stdout
		w.Close()
		done <- assembleEnded(t, err, report)
	}()
	return done
}

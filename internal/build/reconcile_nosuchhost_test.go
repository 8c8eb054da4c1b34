package build_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/internal/pods"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// TestRegistryHostThatDoesNotResolveStalls (issue 32 item 4): a registry
// prefix whose host does not resolve (NXDOMAIN; .invalid never does) is
// waited for at first, naming the host, then after the bounded tries the
// environment is Stalled naming the host and spec.registry.prefix (it was
// Waiting for as long as it existed).
func TestRegistryHostThatDoesNotResolveStalls(t *testing.T) {
	g := NewWithT(t)
	ns := webNamespace(t)
	env := operatortest.WebEnv(ns)
	host := "registry.devloop-nxdomain.invalid"
	env.Spec.Registry.Prefix = host + "/" + ns
	key := operatortest.CreateEnv(t, env)
	created := time.Now()

	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		ready := operatortest.EnvCondition(env, v1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).To(Equal(v1alpha1.ReasonWaiting), ready.Message)
		g.Expect(ready.Message).To(ContainSubstring(host))
		g.Expect(operatortest.EnvCondition(env, v1alpha1.ConditionStalled)).To(BeNil())
	})
	operatortest.ExpectKstatus(t, env, status.InProgressStatus)

	g.Eventually(func(g Gomega) {
		g.Expect(operatortest.Admin.Get(context.Background(), key, env)).To(Succeed())
		stalled := operatortest.EnvCondition(env, v1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(stalled.Reason).To(Equal(v1alpha1.ReasonBuildFailed))
		g.Expect(stalled.Message).To(ContainSubstring(host))
		g.Expect(stalled.Message).To(ContainSubstring("spec.registry.prefix"))
	}, time.Minute, 200*time.Millisecond).Should(Succeed())
	fmt.Printf("Stalled %s after creation: %s\n", time.Since(created).Round(time.Second), operatortest.EnvCondition(env, v1alpha1.ConditionStalled).Message)
	operatortest.ExpectKstatus(t, env, status.FailedStatus)
	expectStalledStaysPut(t, key, env)
}

// expectStalledStaysPut (issue 43 item 6): the component of an
// environment stalled on a host that does not resolve reads Failed (it
// read Building); a later try (a reconcile request) keeps the Stalled
// condition's lastTransitionTime and emits no second BuildFailed event
// (one came every minute, each with new tries in its message).
func expectStalledStaysPut(t *testing.T, key client.ObjectKey, env *v1alpha1.DevEnvironment) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(operatortest.PhaseOf(env, env.Spec.Components[0].Name)).To(Equal(v1alpha1.PhaseFailed))
	since := operatortest.EnvCondition(env, v1alpha1.ConditionStalled).LastTransitionTime
	operatortest.ExpectEvent(t, key.Namespace, v1alpha1.ReasonBuildFailed, "does not resolve")
	// Two later tries, each seen in status.
	for range 2 {
		request := operatortest.RequestReconcile(t, env)
		env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
			g.Expect(env.Status.LastHandledReconcileAt).To(Equal(request))
		})
	}
	stalled := operatortest.EnvCondition(env, v1alpha1.ConditionStalled)
	g.Expect(stalled).NotTo(BeNil())
	g.Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(stalled.LastTransitionTime).To(Equal(since), "Stalled since")
	g.Expect(operatortest.PhaseOf(env, env.Spec.Components[0].Name)).To(Equal(v1alpha1.PhaseFailed))
	// The first try's event, if it sent one, went out before the second
	// try's status was written.
	list := &eventsv1.EventList{}
	g.Expect(operatortest.Admin.List(context.Background(), list, client.InNamespace(key.Namespace))).To(Succeed())
	var count int32
	for _, e := range list.Items {
		if e.Reason == v1alpha1.ReasonBuildFailed {
			count++
			if e.Series != nil {
				count += e.Series.Count - 1
			}
		}
	}
	g.Expect(count).To(Equal(int32(1)), "BuildFailed events")
}

// TestRegistryHostThatDoesNotResolveStallsABuilderJob: the same in a
// builder Job: its assemble step, the real helper, finds the registry
// host does not resolve and says so by its exit code (ExitNoSuchHost);
// the environment waits, then stalls naming spec.registry.prefix.
func TestRegistryHostThatDoesNotResolveStallsABuilderJob(t *testing.T) {
	g := NewWithT(t)
	ns, _ := apiNamespace(t)
	env := amd64APIEnv(ns)
	host := "registry.devloop-nxdomain.invalid"
	env.Spec.Registry.Prefix = host + "/" + ns
	key := operatortest.CreateEnv(t, env)
	// Plays the Job controller and kubelet: every builder Job the
	// operator starts runs its real assemble step and fails as it does.
	finished := map[types.UID]bool{}
	start := time.Now()
	g.Eventually(func(g Gomega) {
		jobs := operatortest.BuilderJobs(g, ns)
		if job, ok := jobs["linux-amd64"]; ok && !finished[job.UID] {
			finished[job.UID] = true
			assemble := runAssemble(t, job)
			g.Expect(assemble.State.Terminated.ExitCode).To(BeEquivalentTo(build.ExitNoSuchHost), assemble.State.Terminated.Message)
			finishJob(t, &job,
				[]corev1.ContainerStatus{operatortest.Terminated(pods.ContainerFetch, 0, ""), operatortest.Terminated(build.ContainerBuild, 0, "")},
				[]corev1.ContainerStatus{assemble}, false)
		}
		g.Expect(operatortest.Admin.Get(context.Background(), key, env)).To(Succeed())
		stalled := operatortest.EnvCondition(env, v1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Message).To(ContainSubstring(host))
		g.Expect(stalled.Message).To(ContainSubstring("spec.registry.prefix"))
	}, time.Minute, 200*time.Millisecond).Should(Succeed())
	failed := start
	fmt.Printf("Stalled %s after the first Job started (%d Jobs): %s\n", time.Since(failed).Round(time.Second), len(finished), operatortest.EnvCondition(env, v1alpha1.ConditionStalled).Message)
	operatortest.ExpectKstatus(t, env, status.FailedStatus)
	g.Expect(operatortest.PhaseOf(env, "api")).To(Equal(v1alpha1.PhaseFailed))
}

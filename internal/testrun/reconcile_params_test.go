package testrun_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testrun"
	"github.com/devloop-dev/devloop/test/builder"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// testEnvOf is the test container's env of a Job.
func testEnvOf(job *batchv1.Job) []corev1.EnvVar {
	for _, c := range job.Spec.Template.Spec.Containers {
		if c.Name == testrun.ContainerTest {
			return c.Env
		}
	}
	return nil
}

// lastValue is the value a container sees for name: its last entry.
func lastValue(env []corev1.EnvVar, name string) string {
	v := ""
	for _, e := range env {
		if e.Name == name {
			v = e.Value
		}
	}
	return v
}

// TestTriggerParams runs a suite with params from the trigger annotation:
// recorded on the run and set on its Job over the suite's default; a
// request with other params queues its own run, one with the same params
// joins it; a param the suite does not list is refused naming the
// accepted ones, and changes nothing.
func TestTriggerParams(t *testing.T) {
	g := NewWithT(t)
	ns := operatortest.Namespace(t)
	e2e := builder.Suite("e2e").Params("E2E_FOCUS", "E2E_SKIP").Env("E2E_FOCUS", "default-focus").Env("E2E_SKIP", "Slow")
	env := operatortest.TestsEnv(t, ns, e2e).Create(t, operatortest.Admin)
	key := client.ObjectKeyFromObject(env)

	operatortest.Annotate(t, env, v1alpha1.TriggerAnnotation, "e2e(E2E_FOCUS=Job%7CPod)")
	env, run := operatortest.ExpectRun(t, env, "e2e", 1, v1alpha1.ResultRunning)
	g.Expect(run.Params).To(Equal([]v1alpha1.EnvVar{{Name: "E2E_FOCUS", Value: "Job|Pod"}}))
	job1 := operatortest.WaitForJob(t, ns, run.JobName)
	g.Expect(lastValue(testEnvOf(job1), "E2E_FOCUS")).To(Equal("Job|Pod"), "the param wins over the suite's env")
	g.Expect(lastValue(testEnvOf(job1), "E2E_SKIP")).To(Equal("Slow"), "a param not set keeps the suite's default")

	// Other params: a run of their own; the same params again join it; no
	// params: a third.
	operatortest.Annotate(t, env, v1alpha1.TriggerAnnotation, "e2e(E2E_SKIP=Flaky)")
	operatortest.ExpectRun(t, env, "e2e", 2, v1alpha1.ResultPending)
	operatortest.Annotate(t, env, v1alpha1.TriggerAnnotation, "e2e( E2E_SKIP=Flaky )")
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(operatortest.RunOf(env, "e2e", 2)).NotTo(BeNil())
		g.Expect(operatortest.RunOf(env, "e2e", 2).Requests).To(Equal(int32(2)))
	})
	operatortest.Annotate(t, env, v1alpha1.TriggerAnnotation, "e2e")
	env, run = operatortest.ExpectRun(t, env, "e2e", 3, v1alpha1.ResultPending)
	g.Expect(run.Params).To(BeEmpty())
	g.Expect(operatortest.RunOf(env, "e2e", 2).Params).To(Equal([]v1alpha1.EnvVar{{Name: "E2E_SKIP", Value: "Flaky"}}))

	// A param the suite does not list.
	before := env.Status.Tests
	operatortest.Annotate(t, env, v1alpha1.TriggerAnnotation, "e2e(GOFLAGS=-v)")
	env = operatortest.WaitForTriggerRefused(t, key, v1alpha1.ReasonUnknownTestParam, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Annotations).NotTo(HaveKey(v1alpha1.TriggerAnnotation))
	})
	g.Expect(operatortest.EnvCondition(env, v1alpha1.ConditionTriggerHandled).Message).To(Equal(
		`trigger "e2e(GOFLAGS=-v)": suite e2e does not accept GOFLAGS; nothing was started. Accepted params: E2E_FOCUS, E2E_SKIP`))
	g.Expect(env.Status.Tests).To(Equal(before), "a refused param changes nothing else")
	operatortest.ExpectEvent(t, ns, v1alpha1.ReasonUnknownTestParam, "Accepted params: E2E_FOCUS, E2E_SKIP")

	// The oldest queued run starts next, with its own params.
	operatortest.EndTestJob(t, job1, 0, "", "ok\n")
	env, run = operatortest.ExpectRun(t, env, "e2e", 2, v1alpha1.ResultRunning)
	job2 := operatortest.WaitForJob(t, ns, run.JobName)
	g.Expect(lastValue(testEnvOf(job2), "E2E_SKIP")).To(Equal("Flaky"))
	g.Expect(lastValue(testEnvOf(job2), "E2E_FOCUS")).To(Equal("default-focus"))
	g.Expect(operatortest.RunOf(env, "e2e", 3).Result).To(Equal(v1alpha1.ResultPending))
}

// TestTestCacheClaim gives a suite a cache: its claim is created as the
// tenant, owned by the environment, mounted at $HOME/.cache with the
// module cache in it, and the same claim serves the next run.
func TestTestCacheClaim(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := operatortest.Namespace(t)
	env := operatortest.TestsEnv(t, ns, builder.Suite("unit").Cache("2Gi"), builder.Suite("plain")).Create(t, operatortest.Admin)

	claimName := testrun.CacheClaimName(env.Name, "unit")
	g.Expect(claimName).To(HaveSuffix("-tcache"))
	mountsOf := func(job *batchv1.Job) (claims []string, mounts []string) {
		for _, v := range job.Spec.Template.Spec.Volumes {
			if v.PersistentVolumeClaim != nil {
				claims = append(claims, v.PersistentVolumeClaim.ClaimName)
			}
		}
		for _, c := range job.Spec.Template.Spec.Containers {
			for _, m := range c.VolumeMounts {
				mounts = append(mounts, m.MountPath)
			}
		}
		return claims, mounts
	}

	operatortest.Annotate(t, env, v1alpha1.TriggerAnnotation, "unit,plain")
	env, run := operatortest.ExpectRun(t, env, "unit", 1, v1alpha1.ResultRunning)
	job1 := operatortest.WaitForJob(t, ns, run.JobName)
	claims, mounts := mountsOf(job1)
	g.Expect(claims).To(Equal([]string{claimName}))
	g.Expect(mounts).To(ContainElement("/home/devloop/.cache"))
	g.Expect(lastValue(testEnvOf(job1), "GOMODCACHE")).To(Equal("/home/devloop/.cache/gomod"))

	pvc := &corev1.PersistentVolumeClaim{}
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: claimName}, pvc)).To(Succeed())
	g.Expect(metav1.IsControlledBy(pvc, env)).To(BeTrue(), "deleted with the environment")
	g.Expect(pvc.Labels).To(HaveKeyWithValue(v1alpha1.LabelRole, v1alpha1.RoleTestCache))
	g.Expect(pvc.Spec.Resources.Requests.Storage().String()).To(Equal("2Gi"))

	// A suite without a cache mounts no claim.
	_, plain := operatortest.ExpectRun(t, env, "plain", 1, v1alpha1.ResultRunning)
	claims, _ = mountsOf(operatortest.WaitForJob(t, ns, plain.JobName))
	g.Expect(claims).To(BeEmpty())

	// The next run mounts the same claim.
	operatortest.EndTestJob(t, job1, 0, "", "ok\n")
	operatortest.ExpectRun(t, env, "unit", 1, v1alpha1.ResultPassed)
	operatortest.Annotate(t, env, v1alpha1.TriggerAnnotation, "unit")
	_, run = operatortest.ExpectRun(t, env, "unit", 2, v1alpha1.ResultRunning)
	claims, _ = mountsOf(operatortest.WaitForJob(t, ns, run.JobName))
	g.Expect(claims).To(Equal([]string{claimName}))
	list := &corev1.PersistentVolumeClaimList{}
	g.Expect(operatortest.Admin.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	g.Expect(list.Items).To(HaveLen(1))
}

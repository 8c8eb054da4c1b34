package build_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// unfinishedJobOf is image's builder Job not ended (nil when none).
func unfinishedJobOf(g Gomega, ns, image string) *batchv1.Job {
	job, ok := buildJobsByImage(g, ns, image)[image]
	if !ok || jobDone(job) {
		return nil
	}
	return &job
}

// TestOneImageMovedBetweenBackendsTakesTurnsWithItself: the turn per
// cache claim is the claim's, whatever backend each build runs on, the
// same image's included. A builder Job is not stopped by a warm build of
// its image, nor a warm build by a Job: so an image moved to a warm
// builder (run.keepWarm set) while its builder Job compiles waits for
// that Job, and one moved back while its warm build compiles starts no
// Job until the warm build ends.
func TestOneImageMovedBetweenBackendsTakesTurnsWithItself(t *testing.T) {
	g := NewWithT(t)
	ns := operatortest.Namespace(t)
	operatortest.CreateDeployer(t, ns, operatortest.Deployer)
	operatortest.AppFiles(t, ns, gpuOperatorTree("one"))
	env := gpuOperatorEnv(ns)
	env.Spec.Components[0].Images = env.Spec.Components[0].Images[:1] // gpu-operator alone
	env.Spec.Components[0].Images[0].Run.KeepWarm = false
	const img = "gpu-operator"
	setWarm := func(warm bool) func(*v1alpha1.DevEnvironment) {
		return func(cur *v1alpha1.DevEnvironment) { cur.Spec.Components[0].Images[0].Run.KeepWarm = warm }
	}
	compiles := &compileSpans{}
	operatortest.WarmExec.Answer(compiles.answer(g, ns))
	key := operatortest.CreateEnv(t, env)

	// Built by a Job; moved to a warm builder while the Job runs.
	var job *batchv1.Job
	operatortest.WaitForEnv(t, key, func(g Gomega, _ *v1alpha1.DevEnvironment) {
		job = unfinishedJobOf(g, ns, img)
		g.Expect(job).NotTo(BeNil())
	})
	operatortest.EditSpec(t, key, setWarm(true))
	operatortest.RunPod(t, ns, build.WarmPodName(env.Name, img, "linux/amd64"))
	operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.ObservedGeneration).To(Equal(env.Generation))
		running, n := compiles.running()
		g.Expect(running || n > 0).To(BeFalse(), "the warm build compiled while builder job %s ran", job.Name)
		c := env.Status.Component("operator")
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Message).To(ContainSubstring("image gpu-operator waits for builder job " + job.Name + " (image gpu-operator)"))
	})
	jobEnd := time.Now()
	finishBuild(t, ns, img, *job)
	operatortest.WaitForEnv(t, key, operatortest.ExpectReadyAndCurrent)
	first := compiles.all()
	g.Expect(first).NotTo(BeEmpty())
	for _, c := range first {
		g.Expect(c.start.Before(jobEnd)).To(BeFalse(), "the warm build compiled before builder job %s ended", job.Name)
	}

	// A push compiles in the warm builder (held); moved back to Jobs
	// meanwhile, the image's Job waits for that compile.
	hold := make(chan struct{})
	defer func() {
		select {
		case <-hold:
		default:
			close(hold)
		}
	}()
	compiles.mu.Lock()
	compiles.hold = hold
	compiles.mu.Unlock()
	operatortest.AppFiles(t, ns, gpuOperatorTree("two"))
	operatortest.RequestReconcile(t, env)
	g.Eventually(func() bool { running, _ := compiles.running(); return running }, operatortest.Timeout).Should(BeTrue(), "the warm build compiles")
	operatortest.EditSpec(t, key, setWarm(false))
	operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.ObservedGeneration).To(Equal(env.Generation))
		running, _ := compiles.running()
		g.Expect(running).To(BeTrue(), "the warm build compiles")
		g.Expect(unfinishedJobOf(g, ns, img) == nil).To(BeTrue(), "a builder job started while the warm build compiled")
		c := env.Status.Component("operator")
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Message).To(ContainSubstring("image gpu-operator waits for the build of image gpu-operator in warm builder"))
	})
	close(hold)
	var next *batchv1.Job
	operatortest.WaitForEnv(t, key, func(g Gomega, _ *v1alpha1.DevEnvironment) {
		next = unfinishedJobOf(g, ns, img)
		g.Expect(next).NotTo(BeNil())
	})
	spans := compiles.all()
	warmEnd := spans[len(spans)-1].end
	g.Expect(warmEnd.IsZero()).To(BeFalse())
	// Creation times are kept to the second.
	g.Expect(next.CreationTimestamp.Time.Before(warmEnd.Truncate(time.Second))).To(BeFalse(),
		"builder job %s started before the warm build ended (%s)", next.Name, warmEnd.Format(time.RFC3339Nano))
	finishBuild(t, ns, img, *next)
	operatortest.WaitForEnv(t, key, operatortest.ExpectReadyAndCurrent)
}

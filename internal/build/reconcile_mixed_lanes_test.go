package build_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/internal/image"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// gpuOperatorTree is the shape of GPU Operator's tree: two mains of one
// module.
func gpuOperatorTree(marker string) map[string]string {
	return map[string]string{
		"go.mod":                       "module github.com/NVIDIA/gpu-operator\n",
		"cmd/gpu-operator/main.go":     "package main // " + marker + "\nfunc main() {}\n",
		"cmd/nvidia-validator/main.go": "package main\nfunc main() {}\n",
	}
}

// gpuOperatorEnv is config/samples/gpu-operator.yaml's build shape: the
// operator image compiled in a warm builder (run.keepWarm), the validator
// image by builder Jobs, from one source and one run spec with a cache,
// so both mount one build cache claim.
func gpuOperatorEnv(ns string) *v1alpha1.DevEnvironment {
	size := resource.MustParse("1Gi")
	run := v1alpha1.BuildRun{Image: "golang:1.25", Command: []string{"go", "build", "-o", "out/{{ .ImageBase }}", "./cmd/{{ .ImageBase }}"},
		Cache: &v1alpha1.BuildCache{Size: &size}}
	operator := v1alpha1.Component{Name: "operator"}
	for _, name := range []string{"gpu-operator", "nvidia-validator"} {
		img := v1alpha1.ImageSpec{Name: name, Source: "gpu-operator", Run: run.DeepCopy(), Platforms: []string{"linux/amd64"},
			Layers:     []v1alpha1.LayerMapping{{From: "out/" + name, To: "/usr/bin/" + name, Mode: "0755"}},
			Entrypoint: []string{"/usr/bin/" + name}}
		img.Run.KeepWarm = name == "gpu-operator"
		operator.Images = append(operator.Images, img)
	}
	return operatortest.Env(ns, "gpu-operator").Registry().PushedSource("gpu-operator", "src").ServiceAccount(operatortest.Deployer).Components(operator).Obj()
}

// compileSpans records the warm builder's compiles of gpu-operator (its
// run steps) as intervals; hold, while set, keeps the next one running.
type compileSpans struct {
	mu    sync.Mutex
	spans []compileSpan
	hold  chan struct{}
}

type compileSpan struct{ start, end time.Time }

// running says whether a recorded compile has not ended, and how many
// were recorded.
func (c *compileSpans) running() (bool, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.spans {
		if s.end.IsZero() {
			return true, len(c.spans)
		}
	}
	return false, len(c.spans)
}

func (c *compileSpans) all() []compileSpan {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]compileSpan(nil), c.spans...)
}

// answer plays gpu-operator's warm build steps in ns: the run step is a
// compile span, the push step pushes an image of its own.
func (c *compileSpans) answer(g Gomega, ns string) func(command []string, stdout, stderr io.Writer) error {
	return func(command []string, stdout, stderr io.Writer) error {
		line := strings.Join(command, " ")
		switch {
		case operatortest.IsStep(command, build.WarmStepRun) && strings.Contains(line, "./cmd/gpu-operator"):
			c.mu.Lock()
			i := len(c.spans)
			c.spans = append(c.spans, compileSpan{start: time.Now()})
			hold := c.hold
			c.mu.Unlock()
			if hold != nil {
				<-hold
			}
			c.mu.Lock()
			c.spans[i].end = time.Now()
			c.mu.Unlock()
		case operatortest.IsStep(command, build.WarmStepPush) && strings.Contains(line, "gpu-operator"):
			var spec image.Spec
			for i := range command[:len(command)-1] {
				if command[i] == "--image" {
					g.Expect(json.Unmarshal([]byte(command[i+1]), &spec)).To(Succeed())
				}
			}
			report, _ := json.Marshal(build.AssembleReport{Digest: pushRandom(g, ns+"/"+spec.Name).String(), Uploaded: 1})
			_, err := fmt.Fprintf(stdout, "%s\n", report)
			return err
		}
		return nil
	}
}

// unfinishedJob is the builder Job of the validator not ended (nil
// when none).
func unfinishedJob(g Gomega, ns string) *batchv1.Job {
	job, ok := buildJobsByImage(g, ns, "nvidia-validator")["nvidia-validator"]
	if !ok || jobDone(job) {
		return nil
	}
	return &job
}

// TestWarmBuilderAndBuilderJobOfOneTreeTakeTurns (issue 42): GPU
// Operator's operator image built by a warm builder and its validator
// image by a builder Job share one build cache claim, and never compile
// at the same time, whichever starts first: the warm build waits while
// the Job runs, the Job waits while the warm build runs, each saying
// for whom; both images end up built.
func TestWarmBuilderAndBuilderJobOfOneTreeTakeTurns(t *testing.T) {
	g := NewWithT(t)
	ns := operatortest.Namespace(t)
	operatortest.CreateDeployer(t, ns, operatortest.Deployer)
	operatortest.AppFiles(t, ns, gpuOperatorTree("one"))
	env := gpuOperatorEnv(ns)
	claim := build.CacheClaimName(env, "gpu-operator")
	g.Expect(build.CacheClaimName(env, "nvidia-validator")).To(Equal(claim), "one claim for the two images")
	compiles := &compileSpans{}
	operatortest.WarmExec.Answer(compiles.answer(g, ns))
	key := operatortest.CreateEnv(t, env)

	// The Job first: the warm builder is not up when the validator's Job
	// starts. Once it is, the operator's build waits for the Job.
	var job *batchv1.Job
	operatortest.WaitForEnv(t, key, func(g Gomega, _ *v1alpha1.DevEnvironment) {
		job = unfinishedJob(g, ns)
		g.Expect(job).NotTo(BeNil())
	})
	operatortest.RunPod(t, ns, build.WarmPodName(env.Name, "gpu-operator", "linux/amd64"))
	operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		running, n := compiles.running()
		g.Expect(running || n > 0).To(BeFalse(), "the warm build compiled while builder job %s ran", job.Name)
		c := env.Status.Component("operator")
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Phase).To(Equal(v1alpha1.PhaseBuilding))
		g.Expect(c.Message).To(ContainSubstring("image gpu-operator waits for builder job " + job.Name + " (image nvidia-validator)"))
	})
	jobEnd := time.Now()
	finishBuild(t, ns, "nvidia-validator", *job)
	operatortest.WaitForEnv(t, key, operatortest.ExpectReadyAndCurrent)
	first := compiles.all()
	g.Expect(first).NotTo(BeEmpty())
	for _, c := range first {
		g.Expect(c.start.Before(jobEnd)).To(BeFalse(), "the warm build compiled before builder job %s ended", job.Name)
	}

	// The warm build first: a push of the tree rebuilds both images; the
	// operator's (first in the spec) compiles, and the validator's Job
	// waits for it.
	hold := make(chan struct{})
	compiles.mu.Lock()
	compiles.hold = hold
	compiles.mu.Unlock()
	operatortest.AppFiles(t, ns, gpuOperatorTree("two"))
	operatortest.RequestReconcile(t, env)
	operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		running, _ := compiles.running()
		g.Expect(running).To(BeTrue(), "the warm build compiles")
		g.Expect(unfinishedJob(g, ns)).To(BeNil(), "a builder job started while the warm build compiled")
		c := env.Status.Component("operator")
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Phase).To(Equal(v1alpha1.PhaseBuilding))
		g.Expect(c.Message).To(ContainSubstring("image nvidia-validator waits for the build of image gpu-operator"))
		g.Expect(c.Message).To(ContainSubstring("shares build cache claim " + claim))
	})
	close(hold)
	var next *batchv1.Job
	operatortest.WaitForEnv(t, key, func(g Gomega, _ *v1alpha1.DevEnvironment) {
		next = unfinishedJob(g, ns)
		g.Expect(next).NotTo(BeNil())
	})
	g.Expect(next.Name).NotTo(Equal(job.Name))
	spans := compiles.all()
	warmEnd := spans[len(spans)-1].end
	g.Expect(warmEnd.IsZero()).To(BeFalse())
	// Creation times are kept to the second.
	g.Expect(next.CreationTimestamp.Time.Before(warmEnd.Truncate(time.Second))).To(BeFalse(),
		"builder job %s started before the warm build ended (%s)", next.Name, warmEnd.Format(time.RFC3339Nano))
	finishBuild(t, ns, "nvidia-validator", *next)
	env = operatortest.WaitForEnv(t, key, operatortest.ExpectReadyAndCurrent)
	for _, name := range []string{"gpu-operator", "nvidia-validator"} {
		ist := env.Status.Component("operator").Image(name)
		g.Expect(ist).NotTo(BeNil(), name)
		g.Expect(ist.Digest).NotTo(BeEmpty(), name)
		g.Expect(ist.Build).NotTo(BeNil(), name)
		g.Expect(ist.Build.Result).To(Equal(v1alpha1.BuildSucceeded), name)
	}
	g.Expect(env.Status.Component("operator").Image("nvidia-validator").Build.Job).To(Equal(next.Name))
	_, n := compiles.running()
	g.Expect(n).To(BeNumerically(">=", 2), "the warm build compiled again after the push")
}

// TestBuilderJobWaitsForTheWarmBuildStatusSaysRuns: status is what says a
// warm build runs, so an operator that did not start it (restarted while
// it compiled) still holds the validator's Job back until the operator's
// build, adopted by the next reconcile of its image, ends.
func TestBuilderJobWaitsForTheWarmBuildStatusSaysRuns(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := operatortest.Namespace(t)
	operatortest.CreateDeployer(t, ns, operatortest.Deployer)
	operatortest.AppFiles(t, ns, gpuOperatorTree("one"))
	env := gpuOperatorEnv(ns)
	env.Spec.Suspend = true
	compiles := &compileSpans{}
	operatortest.WarmExec.Answer(compiles.answer(g, ns))
	key := operatortest.CreateEnv(t, env)
	operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.ObservedGeneration).To(Equal(env.Generation))
	})
	// What an earlier operator process wrote when it started the build.
	pod := build.WarmPodName(env.Name, "gpu-operator", "linux/amd64")
	g.Eventually(func() error {
		cur := &v1alpha1.DevEnvironment{}
		if err := operatortest.Admin.Get(ctx, key, cur); err != nil {
			return err
		}
		cur.Status.Components = []v1alpha1.ComponentStatus{{Name: "operator", Phase: v1alpha1.PhaseBuilding, Images: []v1alpha1.ImageStatus{{
			Name: "gpu-operator", Build: &v1alpha1.BuildStatus{Job: pod, Result: v1alpha1.BuildRunning, StartTime: &metav1.Time{Time: time.Now().Add(-time.Minute)}},
		}}}}
		return operatortest.Admin.Status().Update(ctx, cur)
	}, operatortest.Timeout).Should(Succeed())
	operatortest.EditSpec(t, key, func(cur *v1alpha1.DevEnvironment) { cur.Spec.Suspend = false })

	operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.ObservedGeneration).To(Equal(env.Generation))
		g.Expect(unfinishedJob(g, ns)).To(BeNil(), "a builder job started while status said the warm build ran")
		c := env.Status.Component("operator")
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Phase).To(Equal(v1alpha1.PhaseBuilding))
		g.Expect(c.Message).To(ContainSubstring("image nvidia-validator waits for the build of image gpu-operator in warm builder " + pod))
	})
	// The warm builder runs: its build is done again, and then the Job's
	// turn comes.
	operatortest.RunPod(t, ns, pod)
	var job *batchv1.Job
	operatortest.WaitForEnv(t, key, func(g Gomega, _ *v1alpha1.DevEnvironment) {
		job = unfinishedJob(g, ns)
		g.Expect(job).NotTo(BeNil())
	})
	spans := compiles.all()
	g.Expect(spans).NotTo(BeEmpty())
	g.Expect(job.CreationTimestamp.Time.Before(spans[len(spans)-1].end.Truncate(time.Second))).To(BeFalse(),
		"builder job %s started before the warm build ended", job.Name)
	finishBuild(t, ns, "nvidia-validator", *job)
	operatortest.WaitForEnv(t, key, operatortest.ExpectReadyAndCurrent)
}

// TestWarmBuildHoldsBackOnlyItsOwnNamespacesJobs: two environments of
// the same name in two namespaces have build cache claims of the same
// name; the warm build compiling in one holds back no builder Job of the
// other.
func TestWarmBuildHoldsBackOnlyItsOwnNamespacesJobs(t *testing.T) {
	g := NewWithT(t)
	nsA, nsB := operatortest.Namespace(t), operatortest.Namespace(t)
	for _, ns := range []string{nsA, nsB} {
		operatortest.CreateDeployer(t, ns, operatortest.Deployer)
		operatortest.AppFiles(t, ns, gpuOperatorTree(ns))
	}
	envA, envB := gpuOperatorEnv(nsA), gpuOperatorEnv(nsB)
	g.Expect(build.CacheClaimName(envA, "gpu-operator")).To(Equal(build.CacheClaimName(envB, "gpu-operator")))
	hold := make(chan struct{})
	defer func() {
		select {
		case <-hold:
		default:
			close(hold)
		}
	}()
	compiles := &compileSpans{hold: hold}
	operatortest.WarmExec.Answer(compiles.answer(g, nsA))

	// In A the validator's Job goes first, then the operator's warm build
	// compiles (held).
	keyA := operatortest.CreateEnv(t, envA)
	var job *batchv1.Job
	operatortest.WaitForEnv(t, keyA, func(g Gomega, _ *v1alpha1.DevEnvironment) {
		job = unfinishedJob(g, nsA)
		g.Expect(job).NotTo(BeNil())
	})
	operatortest.RunPod(t, nsA, build.WarmPodName(envA.Name, "gpu-operator", "linux/amd64"))
	finishBuild(t, nsA, "nvidia-validator", *job)
	operatortest.WaitForEnv(t, keyA, func(g Gomega, env *v1alpha1.DevEnvironment) {
		running, _ := compiles.running()
		g.Expect(running).To(BeTrue(), "A's warm build compiles")
		c := env.Status.Component("operator")
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Image("gpu-operator")).To(HaveField("Build", HaveField("Result", v1alpha1.BuildRunning)))
	})

	// B's validator Job starts while A's warm build compiles.
	operatortest.CreateEnv(t, envB)
	g.Eventually(func(g Gomega) {
		g.Expect(unfinishedJob(g, nsB)).NotTo(BeNil())
	}, operatortest.Timeout).Should(Succeed())
	running, _ := compiles.running()
	g.Expect(running).To(BeTrue(), "A's warm build ended before B's Job started: the test shows nothing")
	close(hold)
	operatortest.WaitForEnv(t, keyA, operatortest.ExpectReadyAndCurrent)
}

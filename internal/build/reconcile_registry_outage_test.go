package build_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilexec "k8s.io/client-go/util/exec"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/internal/build/helper"
	"github.com/devloop-dev/devloop/internal/pods"
	"github.com/devloop-dev/devloop/internal/testfiles"
	"github.com/devloop-dev/devloop/internal/testregistry"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// runAssemble plays the kubelet running a builder Job's assemble
// container: the real helper step, with the Job's own arguments, on a
// workspace holding what the build command left. It returns the
// container's end as the kubelet reports it: the exit code and the
// termination message (the report, or the error). extra flags come last,
// so they override the Job's (--registry-wait).
func runAssemble(t *testing.T, job batchv1.Job, extra ...string) corev1.ContainerStatus {
	t.Helper()
	args, report := assembleInvocation(t, job, extra...)
	return assembleEnded(t, helper.Run(context.Background(), args), report)
}

// assembleInvocation is the helper's arguments of job's assemble container
// on a workspace of its own, with extra last, and where it reports.
func assembleInvocation(t *testing.T, job batchv1.Job, extra ...string) ([]string, string) {
	t.Helper()
	i := slices.IndexFunc(job.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == build.ContainerAssemble })
	if i < 0 {
		t.Fatalf("job %s has no assemble container", job.Name)
	}
	args := slices.Clone(job.Spec.Template.Spec.Containers[i].Args)
	workspace := testfiles.Tree(t, map[string]string{"out/api": "#!/bin/sh\n"})
	report := filepath.Join(t.TempDir(), "termination-log")
	args = append(args[1:], "--dir", workspace, "--termination-log", report)
	return append(args, extra...), report
}

// assembleEnded is the assemble container's end as the kubelet reports
// it, from the step's error and its report file.
func assembleEnded(t *testing.T, err error, report string) corev1.ContainerStatus {
	if err = helper.ExitCodeFor(err); err != nil {
		var code helper.ExitError
		if !errors.As(err, &code) {
			code = helper.ExitError{Code: 1}
		}
		return operatortest.Terminated(build.ContainerAssemble, int32(code.Code), err.Error())
	}
	out, rerr := os.ReadFile(report)
	if rerr != nil {
		t.Error(rerr)
	}
	return operatortest.Terminated(build.ContainerAssemble, 0, string(out))
}

// registryOutage is an environment pushing to a real registry of its own,
// and the builder Job it started; the registry keeps what it holds in dir,
// so it can be started again at the same address.
type registryOutage struct {
	ns, dir string
	reg     *testregistry.Process
	key     client.ObjectKey
	job     batchv1.Job
}

// builderJobOnItsOwnRegistry creates the amd64 API environment pushing to
// a registry of its own and waits for its builder Job.
func builderJobOnItsOwnRegistry(t *testing.T) *registryOutage {
	t.Helper()
	o := &registryOutage{dir: t.TempDir()}
	o.ns, _ = apiNamespace(t)
	var err error
	if o.reg, err = testregistry.Run(o.dir); err != nil {
		t.Skipf("no registry: %v", err)
	}
	t.Cleanup(func() { o.reg.Stop() })
	env := amd64APIEnv(o.ns)
	env.Spec.Registry.Prefix = o.reg.Host + "/" + o.ns
	o.key = operatortest.CreateEnv(t, env)
	NewWithT(t).Eventually(func(g Gomega) {
		jobs := operatortest.BuilderJobs(g, o.ns)
		g.Expect(jobs).To(HaveKey("linux-amd64"))
		o.job = jobs["linux-amd64"]
	}, operatortest.Timeout).Should(Succeed())
	return o
}

// back starts the registry again, with what it held, and says when.
func (o *registryOutage) back(t *testing.T) time.Time {
	t.Helper()
	back, err := testregistry.RunAt(o.dir, o.reg.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { back.Stop() })
	return time.Now()
}

// waitingForTheRegistry waits for the environment to read Reconciling,
// reason Waiting, not Stalled, with each of words in the message.
func waitingForTheRegistry(t *testing.T, key client.ObjectKey, words ...string) *v1alpha1.DevEnvironment {
	t.Helper()
	return operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		reconciling := meta.FindStatusCondition(env.Status.Conditions, v1alpha1.ConditionReconciling)
		g.Expect(reconciling).NotTo(BeNil())
		g.Expect(reconciling.Reason).To(Equal(v1alpha1.ReasonWaiting))
		for _, w := range words {
			g.Expect(reconciling.Message).To(ContainSubstring(w))
		}
		g.Expect(meta.IsStatusConditionTrue(env.Status.Conditions, v1alpha1.ConditionStalled)).To(BeFalse())
	})
}

// TestRegistryOutageDuringABuilderJobHeals (issue 32 item 1): the
// environment's registry (a real one) is stopped while a builder Job runs;
// the Job's assemble step, the real helper, finds it down and says so by
// its exit code once its own wait for the registry is over. The
// environment waits (Reconciling, reason Waiting, not
// Stalled) and, once the registry is back, the failed Job is replaced by
// a new one with no help, which builds and pushes: Ready.
func TestRegistryOutageDuringABuilderJobHeals(t *testing.T) {
	g := NewWithT(t)
	o := builderJobOnItsOwnRegistry(t)
	ns, key, reg, first := o.ns, o.key, o.reg, o.job

	// The registry goes down while the build command runs, for longer
	// than the assemble container waits for it (its wait is cut to 1 s
	// here; reconcile_registry_wait_test.go is the wait itself).
	reg.Stop()
	assemble := runAssemble(t, first, "--registry-wait", "1s")
	g.Expect(assemble.State.Terminated.ExitCode).To(BeEquivalentTo(build.ExitUnavailable), assemble.State.Terminated.Message)
	finishJob(t, &first,
		[]corev1.ContainerStatus{operatortest.Terminated(pods.ContainerFetch, 0, ""), operatortest.Terminated(build.ContainerBuild, 0, "")},
		[]corev1.ContainerStatus{assemble}, false)
	env := waitingForTheRegistry(t, key, "registry was unavailable")
	operatortest.ExpectKstatus(t, env, status.InProgressStatus)
	fmt.Println("while the registry is down:", meta.FindStatusCondition(env.Status.Conditions, v1alpha1.ConditionReconciling).Message)

	// Back, at the same address, with what it held.
	returned := o.back(t)
	var second batchv1.Job
	g.Eventually(func(g Gomega) {
		jobs := operatortest.BuilderJobs(g, ns)
		g.Expect(jobs).To(HaveKey("linux-amd64"))
		second = jobs["linux-amd64"]
		g.Expect(second.UID).NotTo(Equal(first.UID), "the failed Job is replaced")
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	fmt.Printf("a new builder job %s after the registry's return\n", time.Since(returned).Round(100*time.Millisecond))
	g.Expect(second.Name).To(Equal(first.Name))

	assemble = runAssemble(t, second)
	g.Expect(assemble.State.Terminated.ExitCode).To(BeZero(), assemble.State.Terminated.Message)
	finishJob(t, &second,
		[]corev1.ContainerStatus{operatortest.Terminated(pods.ContainerFetch, 0, ""), operatortest.Terminated(build.ContainerBuild, 0, "")},
		[]corev1.ContainerStatus{assemble}, true)
	env = operatortest.WaitForEnv(t, key, operatortest.ExpectReadyAndCurrent)
	fmt.Printf("Ready %s after the registry's return\n", time.Since(returned).Round(100*time.Millisecond))
	st := env.Status.Component("api").Image("api")
	g.Expect(st.Build.Result).To(Equal(v1alpha1.BuildSucceeded))
	g.Expect(st.Repository).To(Equal(reg.Host + "/" + ns + "/api"))
	testregistry.Pull(t, st.Repository+"@"+st.Digest)
}

// TestRegistryOutageDuringAWarmBuildHeals (issue 32 item 1, warm path):
// the warm builder's push step finds the registry down and says so by its
// exit code (ExitUnavailable, as the helper does); the environment waits,
// not Stalled, and once the registry answers again the build goes on by
// itself: Ready.
func TestRegistryOutageDuringAWarmBuildHeals(t *testing.T) {
	g := NewWithT(t)
	ns, _ := apiNamespace(t)
	var mu sync.Mutex
	down := true
	t.Cleanup(func() { operatortest.WarmExec.Answer(nil) })
	operatortest.WarmExec.Answer(func(command []string, stdout, stderr io.Writer) error {
		if !operatortest.IsStep(command, build.WarmStepPush) || !strings.Contains(strings.Join(command, " "), ns) {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		if down {
			fmt.Fprintln(stderr, "devloop: registry unavailable for "+ns+"/api: connection refused")
			return utilexec.CodeExitError{Err: errors.New("command terminated with exit code 75"), Code: build.ExitUnavailable}
		}
		d := pushRandom(g, ns+"/api")
		report, _ := json.Marshal(build.AssembleReport{Digest: d.String(), Uploaded: 1})
		_, err := fmt.Fprintf(stdout, "%s\n", report)
		return err
	})
	key := operatortest.CreateEnv(t, warmAPIEnv(ns))
	operatortest.RunPod(t, ns, warmAPIPod)
	env := waitingForTheRegistry(t, key, "registry was unavailable to the push step")
	operatortest.ExpectKstatus(t, env, status.InProgressStatus)

	mu.Lock()
	down = false
	mu.Unlock()
	returned := time.Now()
	operatortest.WaitForEnv(t, key, operatortest.ExpectReadyAndCurrent)
	fmt.Printf("warm build Ready %s after the registry's return\n", time.Since(returned).Round(100*time.Millisecond))
}

// TestBuilderJobPastItsTimeoutIsTriedAgain (issue 36 item 3, Job path): a
// builder Job stopped at its deadline (run.timeout) does not stall the
// environment until the spec changes: status says how long it ran and
// when it is tried again, and the Job is replaced after that delay.
func TestBuilderJobPastItsTimeoutIsTriedAgain(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, _ := apiNamespace(t)
	env := amd64APIEnv(ns)
	env.Spec.Components[0].Images[0].Run.Timeout = &metav1.Duration{Duration: 2 * time.Second}
	key := operatortest.CreateEnv(t, env)
	var first batchv1.Job
	g.Eventually(func(g Gomega) {
		jobs := operatortest.BuilderJobs(g, ns)
		g.Expect(jobs).To(HaveKey("linux-amd64"))
		first = jobs["linux-amd64"]
	}, operatortest.Timeout).Should(Succeed())

	// The Job controller stops it at its deadline.
	now := metav1.Now()
	start := metav1.NewTime(now.Add(-3 * time.Second))
	first.Status.StartTime = &start
	first.Status.Failed = 1
	first.Status.Conditions = []batchv1.JobCondition{
		{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonDeadlineExceeded, LastTransitionTime: now},
		{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonDeadlineExceeded, LastTransitionTime: now},
	}
	g.Expect(operatortest.Admin.Status().Update(ctx, &first)).To(Succeed())

	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		c := env.Status.Component("api")
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Message).To(ContainSubstring("ran 3s, past run.timeout (2s): trying again 2s after it stopped (attempt 2)"))
		g.Expect(c.Image("api").Build.Result).To(Equal(v1alpha1.BuildFailed))
		g.Expect(meta.IsStatusConditionTrue(env.Status.Conditions, v1alpha1.ConditionStalled)).To(BeFalse())
	})
	fmt.Println("after the deadline:", env.Status.Component("api").Message)
	operatortest.ExpectKstatus(t, env, status.InProgressStatus)
	g.Eventually(func(g Gomega) {
		jobs := operatortest.BuilderJobs(g, ns)
		g.Expect(jobs).To(HaveKey("linux-amd64"))
		g.Expect(jobs["linux-amd64"].UID).NotTo(Equal(first.UID), "the timed-out Job is replaced")
	}, operatortest.Timeout).Should(Succeed())
}

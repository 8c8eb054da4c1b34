package build_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilexec "k8s.io/client-go/util/exec"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// TestWarmBuilderBuildsByExec: with run.keepWarm, one builder pod is
// started and each build is exec'd into it once it runs; a build whose
// command fails stalls the environment with its exit code and log tail,
// and the pod is replaced when the run spec changes.
func TestWarmBuilderBuildsByExec(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, first := apiNamespace(t)
	env := warmAPIEnv(ns)
	var pushed string
	operatortest.WarmExec.Answer(func(command []string, stdout, stderr io.Writer) error {
		if !operatortest.IsStep(command, build.WarmStepPush) {
			return nil
		}
		// What `helper build --step push` does: push, then report.
		d := pushRandom(g, ns+"/api")
		pushed = d.String()
		fmt.Fprintln(stderr, "go build ./cmd/api")
		report, _ := json.Marshal(build.AssembleReport{Digest: d.String(), Uploaded: 2})
		_, err := fmt.Fprintf(stdout, "%s\n", report)
		return err
	})
	key := operatortest.CreateEnv(t, env)

	podKey := client.ObjectKey{Namespace: ns, Name: warmAPIPod}
	pod := &corev1.Pod{}
	g.Eventually(func() error { return operatortest.Admin.Get(ctx, podKey, pod) }, operatortest.Timeout).Should(Succeed())
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.Components).To(HaveLen(1))
		g.Expect(env.Status.Components[0].Phase).To(Equal(v1alpha1.PhaseBuilding))
		g.Expect(env.Status.Components[0].Message).To(ContainSubstring("warm builder"))
	})
	operatortest.ExpectKstatus(t, env, status.InProgressStatus)
	g.Expect(pod.OwnerReferences).To(HaveLen(1))
	g.Expect(pod.Labels).To(HaveKeyWithValue(v1alpha1.LabelRole, v1alpha1.RoleWarmBuild))
	g.Expect(*pod.Spec.SecurityContext.RunAsNonRoot).To(BeTrue())
	g.Expect(pod.Spec.InitContainers).To(HaveLen(1))
	g.Expect(pod.Spec.InitContainers[0].Image).To(Equal(operatortest.HelperImage))
	g.Expect(pod.Spec.InitContainers[0].Args).To(ContainElements("install", build.WarmHelper))
	warm := pod.Spec.Containers[0]
	g.Expect(warm.Name).To(Equal(build.ContainerWarm))
	g.Expect(warm.Image).To(HavePrefix("golang:1.25"), "pinned where the registry answers")
	g.Expect(warm.Command).To(Equal([]string{build.WarmHelper, "helper", "idle", "--build-log", build.WarmBuildLog}), "the build command's output goes to its log")
	g.Expect(warm.Env).To(ContainElement(corev1.EnvVar{Name: "GOARCH", Value: "amd64"}))
	g.Expect(warm.Env).NotTo(ContainElement(HaveField("Name", "CGO_ENABLED")), "the build's env goes with each build, so a new revision keeps the pod")
	g.Expect(warm.VolumeMounts).To(ContainElement(corev1.VolumeMount{Name: "cache", MountPath: "/go/pkg/mod", SubPath: "p1"}))
	g.Expect(operatortest.WarmExec.CallsWith(ns)).To(BeZero(), "no exec before the builder runs")

	// The kubelet starts it: the build is exec'd, once.
	operatortest.RunPod(t, ns, warmAPIPod)
	env = operatortest.WaitForEnv(t, key, operatortest.ExpectReadyAndCurrent)
	st := env.Status.Component("api").Image("api")
	g.Expect(st.Digest).To(Equal(pushed))
	g.Expect(st.Build.Result).To(Equal(v1alpha1.BuildSucceeded))
	g.Expect(st.Build.Job).To(Equal(podKey.Name))
	g.Expect(operatortest.WarmExec.CallsWith(first.String())).To(Equal(1), "one exec, naming the resolved source digest")
	g.Expect(operatortest.WarmExec.CallsWith(`{"name":"DEVLOOP_REVISION","value":"`+first.Hex+`"},{"name":"DEVLOOP_SHORT_REVISION","value":"`+first.Hex[:12]+`"},`+
		`{"name":"GOCACHE","value":"/home/devloop/.cache/go-build"},{"name":"GOMODCACHE","value":"/go/pkg/mod"},{"name":"GOFLAGS","value":"-v"},`+
		`{"name":"CGO_ENABLED","value":"0"}`)).
		To(Equal(1), "the run step gets the revision, the go command's caches and -v, then the spec's env")
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)

	// A change that does not compile: exit code and log tail in status.
	operatortest.WarmExec.Answer(func(command []string, _, stderr io.Writer) error {
		if !operatortest.IsStep(command, build.WarmStepRun) {
			return nil
		}
		fmt.Fprintln(stderr, "cmd/api/main.go:2:1: syntax error: unexpected }")
		return utilexec.CodeExitError{Err: errors.New("command terminated with exit code 2"), Code: 2}
	})
	second := operatortest.AppFiles(t, ns, map[string]string{"cmd/api/main.go": "package main // " + ns + "\nfunc main() {\n"})
	operatortest.RequestReconcile(t, env)
	env = operatortest.WaitForStalled(t, key, v1alpha1.ReasonBuildFailed, "exit code 2", "syntax error")
	st = env.Status.Component("api").Image("api")
	g.Expect(st.Build.Result).To(Equal(v1alpha1.BuildFailed))
	g.Expect(*st.Build.ExitCode).To(BeEquivalentTo(2))
	g.Expect(st.Build.LogTail).To(ContainSubstring("syntax error"))
	g.Expect(operatortest.WarmExec.CallsWith(second.String())).To(Equal(1))
	operatortest.ExpectKstatus(t, env, status.FailedStatus)

	// A new builder image replaces the pod.
	// (an edit retried on a conflict: the operator may write status between
	// a read and the update)
	operatortest.EditSpec(t, key, func(env *v1alpha1.DevEnvironment) {
		env.Spec.Components[0].Images[0].Run.Image = "golang:1.26"
	})
	g.Eventually(func(g Gomega) {
		replaced := &corev1.Pod{}
		g.Expect(operatortest.Admin.Get(ctx, podKey, replaced)).To(Succeed())
		g.Expect(replaced.UID).NotTo(Equal(pod.UID))
		g.Expect(replaced.Spec.Containers[0].Image).To(HavePrefix("golang:1.26"))
	}, operatortest.Timeout).Should(Succeed())
}

// TestWarmBuilderOfAnotherOwnerIsLeftAlone: a pod with the warm
// builder's name that this environment did not create (another
// environment's, or made by hand) is neither exec'd into nor replaced; the
// environment stalls naming it.
func TestWarmBuilderOfAnotherOwnerIsLeftAlone(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, _ := apiNamespace(t)
	squatter := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: warmAPIPod},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	g.Expect(operatortest.Admin.Create(ctx, squatter)).To(Succeed())
	key := operatortest.CreateEnv(t, warmAPIEnv(ns))

	operatortest.WaitForStalled(t, key, v1alpha1.ReasonBuildFailed, "warm builder pod "+squatter.Name+" exists and belongs to another owner")
	pod := &corev1.Pod{}
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKeyFromObject(squatter), pod)).To(Succeed())
	g.Expect(pod.UID).To(Equal(squatter.UID), "not replaced")
	g.Expect(operatortest.WarmExec.CallsWith(ns)).To(BeZero(), "never exec'd into")
}

// TestRefusedExecStallsForbidden: a ServiceAccount that may run warm
// builders but not exec into them is refused by the API server (a 403 on
// the connection upgrade, told by its Status, not by a word in a message):
// the environment stalls with reason Forbidden, naming the right it needs.
func TestRefusedExecStallsForbidden(t *testing.T) {
	ns := operatortest.Namespace(t)
	operatortest.WarmExec.ExecForReal(ns)
	operatortest.AppFiles(t, ns, map[string]string{"cmd/api/main.go": "package main\nfunc main() {}\n"})
	operatortest.CreateServiceAccount(t, ns, "builder")
	operatortest.Allow(t, ns, "builder",
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods", "persistentvolumeclaims"}, Verbs: []string{"get", "list", "create", "delete"}})
	env := warmAPIEnv(ns)
	env.Spec.ServiceAccountName = "builder"
	key := operatortest.CreateEnv(t, env)
	operatortest.RunPod(t, ns, warmAPIPod)
	env = operatortest.WaitForStalled(t, key, v1alpha1.ReasonForbidden, "pods/exec")
	operatortest.ExpectKstatus(t, env, status.FailedStatus)
}

// TestStaleWarmBuilderIsRemoved: a warm builder of the environment that no
// platform uses any more (here: named by the earlier scheme) is deleted,
// since an idle builder still holds the credentials; the current one
// stays.
func TestStaleWarmBuilderIsRemoved(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, _ := apiNamespace(t)
	env := warmAPIEnv(ns)
	key := operatortest.CreateEnv(t, env)
	current := &corev1.Pod{}
	g.Eventually(func() error {
		return operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: warmAPIPod}, current)
	}, operatortest.Timeout).Should(Succeed())
	stale := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "api-api-amd64-warm", Labels: current.Labels,
			OwnerReferences: current.OwnerReferences},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	g.Expect(operatortest.Admin.Create(ctx, stale)).To(Succeed())
	operatortest.RequestReconcile(t, env)
	g.Eventually(func() bool {
		return apierrors.IsNotFound(operatortest.Admin.Get(ctx, client.ObjectKeyFromObject(stale), &corev1.Pod{}))
	}, operatortest.Timeout).Should(BeTrue())
	kept := &corev1.Pod{}
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKeyFromObject(current), kept)).To(Succeed())
	g.Expect(kept.UID).To(Equal(current.UID))
	env = operatortest.WaitForPhase(t, key, v1alpha1.PhaseBuilding)
	operatortest.ExpectKstatus(t, env, status.InProgressStatus)
}

// TestWarmBuildPastItsTimeoutIsTriedAgain (issue 17, crossing 9; issue 36
// item 3): a warm build is stopped at the spec's run.timeout, counted from
// its start; it does not stall the environment until the spec changes but
// is tried again after a delay, and status says how long it ran, that it
// ran past the timeout and when the next attempt starts.
func TestWarmBuildPastItsTimeoutIsTriedAgain(t *testing.T) {
	g := NewWithT(t)
	ns, revision := apiNamespace(t)
	operatortest.WarmExec.HangIn(ns)
	env := warmAPIEnv(ns)
	env.Spec.Components[0].Images[0].Run.Timeout = &metav1.Duration{Duration: 2 * time.Second}
	key := operatortest.CreateEnv(t, env)
	operatortest.RunPod(t, ns, warmAPIPod)
	runs := func() int {
		n := 0
		for _, c := range operatortest.WarmExec.Calls() {
			line := strings.Join(c, " ")
			if operatortest.IsStep(c, build.WarmStepRun) && strings.Contains(line, revision.Hex) {
				n++
			}
		}
		return n
	}
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		c := env.Status.Component("api")
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Message).To(MatchRegexp(`ran \d+s, past run.timeout \(2s\): trying again in \d+s \(attempt 2\)`))
		st := c.Image("api")
		g.Expect(st.Build.Result).To(Equal(v1alpha1.BuildFailed))
		g.Expect(st.Build.LogTail).To(ContainSubstring("compiling forever"))
	})
	fmt.Println("status after the timeout:", env.Status.Component("api").Message)
	operatortest.ExpectKstatus(t, env, status.InProgressStatus)
	g.Expect(meta.IsStatusConditionTrue(env.Status.Conditions, v1alpha1.ConditionStalled)).To(BeFalse(), "a timed-out build is retried, not stalled")

	// The second attempt starts by itself, with no change of the spec.
	g.Eventually(runs, operatortest.Timeout).Should(BeNumerically(">=", 2))
	operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.Component("api").Message).To(ContainSubstring("(attempt 3)"))
	})
}

// TestRunningWarmBuildShowsItsLogTail is issue 18 item 11 in status: a
// warm build still compiling has the end of its output in
// status.components[].images[].build.logTail, brought up to date while it
// runs, not only once it failed; and (issue 42) the component's message
// counts the packages the go command said it compiled.
func TestRunningWarmBuildShowsItsLogTail(t *testing.T) {
	ns, _ := apiNamespace(t)
	operatortest.WarmExec.HangIn(ns)
	// The fetch step succeeds; the run step compiles until it is stopped.
	operatortest.WarmExec.Answer(func(_ []string, _, _ io.Writer) error { return nil })
	env := warmAPIEnv(ns)
	env.Spec.Components[0].Images[0].Run.Timeout = &metav1.Duration{Duration: time.Minute}
	key := operatortest.CreateEnv(t, env)
	operatortest.RunPod(t, ns, warmAPIPod)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		st := env.Status.Component("api").Image("api")
		g.Expect(st).NotTo(BeNil())
		g.Expect(st.Build).NotTo(BeNil())
		g.Expect(st.Build.Result).To(Equal(v1alpha1.BuildRunning))
		g.Expect(st.Build.LogTail).To(ContainSubstring("compiling forever"))
		g.Expect(env.Status.Component("api").Message).To(MatchRegexp(`building image api in warm builder \S+: 2 packages compiled in \d+s`))
	})
	operatortest.ExpectKstatus(t, env, status.InProgressStatus)
}

// TestWarmBuildAdoptedKeepsItsStart (issue 36 items 1 and 2): an operator
// that restarts while a warm build runs execs the build again; the
// helper's claim adopts the running build (the helper tests prove it runs
// once) and answers its token and original start. Status keeps that
// start, not the restart's, and the later steps go on with the adopted
// token.
func TestWarmBuildAdoptedKeepsItsStart(t *testing.T) {
	g := NewWithT(t)
	ns, _ := apiNamespace(t)
	original := time.Now().Add(-40 * time.Minute).Truncate(time.Second)
	operatortest.WarmExec.ClaimAdopts(ns, build.WarmClaim{Token: "started-before-the-restart", Started: original})
	operatortest.WarmExec.HangIn(ns)
	env := warmAPIEnv(ns)
	env.Spec.Components[0].Images[0].Run.Timeout = &metav1.Duration{Duration: time.Hour}
	key := operatortest.CreateEnv(t, env)
	operatortest.RunPod(t, ns, warmAPIPod)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		st := env.Status.Component("api").Image("api")
		g.Expect(st).NotTo(BeNil())
		g.Expect(st.Build).NotTo(BeNil())
		g.Expect(st.Build.Result).To(Equal(v1alpha1.BuildRunning))
		g.Expect(st.Build.StartTime).NotTo(BeNil())
		g.Expect(st.Build.StartTime.Time.Equal(original)).To(BeTrue(), "start %s, want the adopted build's %s", st.Build.StartTime, original)
	})
	g.Eventually(func() int {
		return operatortest.WarmExec.CallsWith("--step " + build.WarmStepRun + " --token started-before-the-restart")
	}, operatortest.Timeout).Should(Equal(1), "the run step goes on with the adopted build's token")
	g.Expect(operatortest.WarmExec.CallsWith("--step " + build.WarmStepFetch + " --token started-before-the-restart")).To(Equal(1))
	operatortest.ExpectKstatus(t, env, status.InProgressStatus)
}

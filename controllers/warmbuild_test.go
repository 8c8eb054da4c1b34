package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilexec "k8s.io/client-go/util/exec"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/internal/identity"
)

// fakeExec plays the kubelet's exec for warm builders: envtest runs no
// pods. Each call is recorded; the push step is answered by run, the
// others succeed unless fail says otherwise.
type fakeExec struct {
	mu    sync.Mutex
	calls [][]string
	run   func(command []string, stdout, stderr io.Writer) error
	// real lists namespaces whose execs go to the API server as the
	// tenant (which refuses them or finds no kubelet).
	real map[string]bool
	// hang lists namespaces whose build command runs until its context
	// ends.
	hang map[string]bool
}

var suiteExec = &fakeExec{}

func (f *fakeExec) Exec(ctx context.Context, t *identity.Tenant, namespace, pod, container string, command []string, stdout, stderr io.Writer) error {
	f.mu.Lock()
	f.calls = append(f.calls, command)
	run, real, hang := f.run, f.real[namespace], f.hang[namespace]
	f.mu.Unlock()
	if real {
		return t.Exec(ctx, namespace, pod, container, command, stdout, stderr)
	}
	if hang && isStep(command, build.WarmStepRun) {
		fmt.Fprintln(stderr, "compiling forever")
		<-ctx.Done()
		return ctx.Err()
	}
	step := ""
	for i := range command[:len(command)-1] {
		if command[i] == "--step" {
			step = command[i+1]
		}
	}
	// Each step runs where WarmBuildSteps says: credentials only in the
	// agent, the build command only in the build container.
	want := map[string]string{build.WarmStepFetch: build.ContainerWarmAgent, build.WarmStepRun: build.ContainerWarm, build.WarmStepPush: build.ContainerWarmAgent}[step]
	if want == "" || container != want {
		return fmt.Errorf("step %q exec'd into container %q", step, container)
	}
	return run(command, stdout, stderr)
}

// isStep reports whether command is the warm build's step.
func isStep(command []string, step string) bool {
	return strings.Contains(strings.Join(command, " "), "--step "+step)
}

// hangIn makes ns's build commands run until their context ends.
func (f *fakeExec) hangIn(ns string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.hang == nil {
		f.hang = map[string]bool{}
	}
	f.hang[ns] = true
}

// execForReal sends ns's execs to the API server.
func (f *fakeExec) execForReal(ns string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.real == nil {
		f.real = map[string]bool{}
	}
	f.real[ns] = true
}

func (f *fakeExec) set(run func(command []string, stdout, stderr io.Writer) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.run = run
}

func (f *fakeExec) callsWith(s string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if strings.Contains(strings.Join(c, " "), s) {
			n++
		}
	}
	return n
}

// TestWarmBuilderBuildsByExec: with run.keepWarm, one builder pod is
// started and each build is exec'd into it once it runs; a build whose
// command fails stalls the environment with its exit code and log tail,
// and the pod is replaced when the run spec changes.
func TestWarmBuilderBuildsByExec(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	// Content of its own: callsWith counts execs naming its digest.
	first := reg.pushSource(t, ns+"/src", "dev", map[string]string{"cmd/api/main.go": "package main // " + ns + "\nfunc main() {}\n"})
	deployer(t, ns, "deployer", true)
	env := apiEnv(ns)
	env.Spec.ServiceAccountName = "deployer"
	img := &env.Spec.Components[0].Images[0]
	img.Platforms = []string{"linux/amd64"}
	img.Run.KeepWarm = true
	var pushed string
	suiteExec.set(func(command []string, stdout, stderr io.Writer) error {
		if !isStep(command, build.WarmStepPush) {
			return nil
		}
		// What `helper build --step push` does: push, then report.
		image, err := random.Image(256, 1)
		if err != nil {
			return err
		}
		d, _ := image.Digest()
		ref, _ := name.NewDigest(fmt.Sprintf("%s/%s/api@%s", reg.host, ns, d), name.Insecure)
		if err := remote.Write(ref, image); err != nil {
			return err
		}
		pushed = d.String()
		fmt.Fprintln(stderr, "go build ./cmd/api")
		report, _ := json.Marshal(build.AssembleReport{Digest: d.String(), Uploaded: 2})
		_, err = fmt.Fprintf(stdout, "%s\n", report)
		return err
	})
	g.Expect(k8s.Create(ctx, env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)

	podKey := client.ObjectKey{Namespace: ns, Name: build.WarmPodName("api", "api", "linux/amd64")}
	pod := &corev1.Pod{}
	g.Eventually(func() error { return k8s.Get(ctx, podKey, pod) }, timeout).Should(Succeed())
	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.Components).To(HaveLen(1))
		g.Expect(env.Status.Components[0].Phase).To(Equal(v1alpha1.PhaseBuilding))
		g.Expect(env.Status.Components[0].Message).To(ContainSubstring("warm builder"))
	})
	expectKstatus(t, env, status.InProgressStatus)
	g.Expect(pod.OwnerReferences).To(HaveLen(1))
	g.Expect(pod.Labels).To(HaveKeyWithValue(v1alpha1.LabelRole, v1alpha1.RoleWarmBuild))
	g.Expect(*pod.Spec.SecurityContext.RunAsNonRoot).To(BeTrue())
	g.Expect(pod.Spec.InitContainers).To(HaveLen(1))
	g.Expect(pod.Spec.InitContainers[0].Image).To(Equal(helperImage))
	g.Expect(pod.Spec.InitContainers[0].Args).To(ContainElements("install", build.WarmHelper))
	warm := pod.Spec.Containers[0]
	g.Expect(warm.Name).To(Equal(build.ContainerWarm))
	g.Expect(warm.Image).To(Equal("golang:1.25"))
	g.Expect(warm.Command).To(Equal([]string{build.WarmHelper, "helper", "idle", "--build-log", build.WarmBuildLog}), "the build command's output goes to its log")
	g.Expect(warm.Env).To(ContainElement(corev1.EnvVar{Name: "GOARCH", Value: "amd64"}))
	g.Expect(warm.Env).NotTo(ContainElement(HaveField("Name", "CGO_ENABLED")), "the build's env goes with each build, so a new revision keeps the pod")
	g.Expect(warm.VolumeMounts).To(ContainElement(corev1.VolumeMount{Name: "cache", MountPath: "/go/pkg/mod", SubPath: "p1"}))
	g.Expect(suiteExec.callsWith(ns)).To(BeZero(), "no exec before the builder runs")

	// The kubelet starts it: the build is exec'd, once.
	pod.Status.Phase = corev1.PodRunning
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{
		{Name: build.ContainerWarm, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
		{Name: build.ContainerWarmAgent, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	g.Expect(k8s.Status().Update(ctx, pod)).To(Succeed())
	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) { readyCurrent(g, env) })
	st := imageOf(env, "api", "api")
	g.Expect(st.Digest).To(Equal(pushed))
	g.Expect(st.Build.Result).To(Equal(v1alpha1.BuildSucceeded))
	g.Expect(st.Build.Job).To(Equal(podKey.Name))
	g.Expect(suiteExec.callsWith(first.String())).To(Equal(1), "one exec, naming the resolved source digest")
	g.Expect(suiteExec.callsWith(`{"name":"DEVLOOP_REVISION","value":"`+first.Hex+`"},{"name":"DEVLOOP_SHORT_REVISION","value":"`+first.Hex[:12]+`"},{"name":"CGO_ENABLED","value":"0"}`)).
		To(Equal(1), "the run step gets the revision, then the spec's env")
	expectKstatus(t, env, status.CurrentStatus)

	// A change that does not compile: exit code and log tail in status.
	suiteExec.set(func(command []string, _, stderr io.Writer) error {
		if !isStep(command, build.WarmStepRun) {
			return nil
		}
		fmt.Fprintln(stderr, "cmd/api/main.go:2:1: syntax error: unexpected }")
		return utilexec.CodeExitError{Err: errors.New("command terminated with exit code 2"), Code: 2}
	})
	second := reg.pushSource(t, ns+"/src", "dev", map[string]string{"cmd/api/main.go": "package main // " + ns + "\nfunc main() {\n"})
	requestReconcile(t, env)
	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		stalled := condition(env, v1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Reason).To(Equal(v1alpha1.ReasonBuildFailed))
		g.Expect(stalled.Message).To(ContainSubstring("exit code 2"))
		g.Expect(stalled.Message).To(ContainSubstring("syntax error"))
	})
	st = imageOf(env, "api", "api")
	g.Expect(st.Build.Result).To(Equal(v1alpha1.BuildFailed))
	g.Expect(*st.Build.ExitCode).To(BeEquivalentTo(2))
	g.Expect(st.Build.LogTail).To(ContainSubstring("syntax error"))
	g.Expect(suiteExec.callsWith(second.String())).To(Equal(1))
	expectKstatus(t, env, status.FailedStatus)

	// A new builder image replaces the pod.
	g.Expect(k8s.Get(ctx, key, env)).To(Succeed())
	env.Spec.Components[0].Images[0].Run.Image = "golang:1.26"
	g.Expect(k8s.Update(ctx, env)).To(Succeed())
	g.Eventually(func(g Gomega) {
		replaced := &corev1.Pod{}
		g.Expect(k8s.Get(ctx, podKey, replaced)).To(Succeed())
		g.Expect(replaced.UID).NotTo(Equal(pod.UID))
		g.Expect(replaced.Spec.Containers[0].Image).To(Equal("golang:1.26"))
	}, timeout).Should(Succeed())
}

// TestWarmBuilderOfAnotherOwnerIsLeftAlone: a pod with the warm
// builder's name that this environment did not create (another
// environment's, or made by hand) is neither exec'd into nor replaced; the
// environment stalls naming it.
func TestWarmBuilderOfAnotherOwnerIsLeftAlone(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	reg.pushSource(t, ns+"/src", "dev", map[string]string{"cmd/api/main.go": "package main\nfunc main() {}\n"})
	squatter := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: build.WarmPodName("api", "api", "linux/amd64")},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	g.Expect(k8s.Create(ctx, squatter)).To(Succeed())
	deployer(t, ns, "deployer", true)
	env := apiEnv(ns)
	env.Spec.ServiceAccountName = "deployer"
	img := &env.Spec.Components[0].Images[0]
	img.Platforms = []string{"linux/amd64"}
	img.Run.KeepWarm = true
	g.Expect(k8s.Create(ctx, env)).To(Succeed())

	eventually(t, client.ObjectKeyFromObject(env), func(g Gomega, env *v1alpha1.DevEnvironment) {
		stalled := condition(env, v1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Reason).To(Equal(v1alpha1.ReasonBuildFailed))
		g.Expect(stalled.Message).To(ContainSubstring("warm builder pod " + squatter.Name + " exists and belongs to another owner"))
	})
	pod := &corev1.Pod{}
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(squatter), pod)).To(Succeed())
	g.Expect(pod.UID).To(Equal(squatter.UID), "not replaced")
	g.Expect(suiteExec.callsWith(ns)).To(BeZero(), "never exec'd into")
}

// TestRefusedExecStallsForbidden: a ServiceAccount that may run warm
// builders but not exec into them is refused by the API server (a 403 on
// the connection upgrade, told by its Status, not by a word in a message):
// the environment stalls with reason Forbidden, naming the right it needs.
func TestRefusedExecStallsForbidden(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	suiteExec.execForReal(ns)
	reg.pushSource(t, ns+"/src", "dev", map[string]string{"cmd/api/main.go": "package main\nfunc main() {}\n"})
	deployer(t, ns, "builder", false)
	allow(t, ns, "builder",
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods", "persistentvolumeclaims"}, Verbs: []string{"get", "list", "create", "delete"}})
	env := apiEnv(ns)
	env.Spec.ServiceAccountName = "builder"
	img := &env.Spec.Components[0].Images[0]
	img.Platforms = []string{"linux/amd64"}
	img.Run.KeepWarm = true
	g.Expect(k8s.Create(ctx, env)).To(Succeed())
	pod := &corev1.Pod{}
	g.Eventually(func() error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: build.WarmPodName("api", "api", "linux/amd64")}, pod)
	}, timeout).Should(Succeed())
	pod.Status.Phase = corev1.PodRunning
	for _, c := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}})
	}
	g.Expect(k8s.Status().Update(ctx, pod)).To(Succeed())
	env = eventually(t, client.ObjectKeyFromObject(env), func(g Gomega, env *v1alpha1.DevEnvironment) {
		stalled := condition(env, v1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Reason).To(Equal(v1alpha1.ReasonForbidden))
		g.Expect(stalled.Message).To(ContainSubstring("pods/exec"))
	})
	expectKstatus(t, env, status.FailedStatus)
}

// TestStaleWarmBuilderIsRemoved: a warm builder of the environment that no
// platform uses any more (here: named by the earlier scheme) is deleted,
// since an idle builder still holds the credentials; the current one
// stays.
func TestStaleWarmBuilderIsRemoved(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	reg.pushSource(t, ns+"/src", "dev", map[string]string{"cmd/api/main.go": "package main\nfunc main() {}\n"})
	deployer(t, ns, "deployer", true)
	env := apiEnv(ns)
	env.Spec.ServiceAccountName = "deployer"
	img := &env.Spec.Components[0].Images[0]
	img.Platforms = []string{"linux/amd64"}
	img.Run.KeepWarm = true
	g.Expect(k8s.Create(ctx, env)).To(Succeed())
	current := &corev1.Pod{}
	g.Eventually(func() error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: build.WarmPodName("api", "api", "linux/amd64")}, current)
	}, timeout).Should(Succeed())
	stale := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "api-api-amd64-warm", Labels: current.Labels,
			OwnerReferences: current.OwnerReferences},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	g.Expect(k8s.Create(ctx, stale)).To(Succeed())
	requestReconcile(t, env)
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(stale), &corev1.Pod{}))
	}, timeout).Should(BeTrue())
	kept := &corev1.Pod{}
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(current), kept)).To(Succeed())
	g.Expect(kept.UID).To(Equal(current.UID))
	env = eventually(t, client.ObjectKeyFromObject(env), func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.Components).To(HaveLen(1))
		g.Expect(env.Status.Components[0].Phase).To(Equal(v1alpha1.PhaseBuilding))
	})
	expectKstatus(t, env, status.InProgressStatus)
}

// TestWarmBuildHonoursRunTimeout (issue 17, crossing 9): a warm build is
// stopped at the spec's run.timeout (it was a fixed 15 minutes), and the
// environment stalls as for a builder Job past its deadline.
func TestWarmBuildHonoursRunTimeout(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	suiteExec.hangIn(ns)
	reg.pushSource(t, ns+"/src", "dev", map[string]string{"cmd/api/main.go": "package main // " + ns + "\n"})
	deployer(t, ns, "deployer", true)
	env := apiEnv(ns)
	env.Spec.ServiceAccountName = "deployer"
	img := &env.Spec.Components[0].Images[0]
	img.Platforms = []string{"linux/amd64"}
	img.Run.KeepWarm = true
	img.Run.Timeout = &metav1.Duration{Duration: 2 * time.Second}
	g.Expect(k8s.Create(ctx, env)).To(Succeed())
	pod := &corev1.Pod{}
	g.Eventually(func() error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: build.WarmPodName("api", "api", "linux/amd64")}, pod)
	}, timeout).Should(Succeed())
	pod.Status.Phase = corev1.PodRunning
	for _, c := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}})
	}
	g.Expect(k8s.Status().Update(ctx, pod)).To(Succeed())
	env = eventually(t, client.ObjectKeyFromObject(env), func(g Gomega, env *v1alpha1.DevEnvironment) {
		stalled := condition(env, v1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Reason).To(Equal(v1alpha1.ReasonBuildFailed))
		g.Expect(stalled.Message).To(ContainSubstring("took longer than run.timeout (2s)"))
	})
	st := imageOf(env, "api", "api")
	g.Expect(st.Build.Result).To(Equal(v1alpha1.BuildFailed))
	g.Expect(st.Build.LogTail).To(ContainSubstring("compiling forever"))
	expectKstatus(t, env, status.FailedStatus)
}

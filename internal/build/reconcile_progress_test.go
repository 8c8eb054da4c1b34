package build_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/internal/pods"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// TestRunningBuildCountsPackagesCompiled (issue 42): during a long cold
// compile in a builder Job the component's message named only the Job,
// and the log's last line said "go: downloading …". The build command
// runs with GOFLAGS=-v, so the go command prints each package it
// compiles; the message counts them, as `make dev-up` does locally, and
// the count moves as the log grows. Other lines (module downloads, a
// make command) are not counted.
func TestRunningBuildCountsPackagesCompiled(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, _ := apiNamespace(t)
	key := operatortest.CreateEnv(t, amd64APIEnv(ns))
	job := operatortest.WaitForBuilderJob(t, ns, "linux-amd64")
	builder := job.Spec.Template.Spec.InitContainers[len(job.Spec.Template.Spec.InitContainers)-1]
	g.Expect(builder.Name).To(Equal(build.ContainerBuild))
	g.Expect(builder.Env).To(ContainElement(corev1.EnvVar{Name: "GOFLAGS", Value: "-v"}), "the go command prints what it compiles")

	// The kubelet's part: the Job's pod, its build container running for
	// two minutes, and its log so far.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: job.Name + "-" + string(job.UID)[:5],
			Labels:          map[string]string{batchv1.JobNameLabel: job.Name},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(&job, batchv1.SchemeGroupVersion.WithKind("Job"))}},
		Spec: job.Spec.Template.Spec,
	}
	g.Expect(operatortest.Admin.Create(ctx, pod)).To(Succeed())
	pod.Status.Phase = corev1.PodPending
	pod.Status.InitContainerStatuses = []corev1.ContainerStatus{
		operatortest.Terminated(pods.ContainerFetch, 0, ""),
		{Name: build.ContainerBuild, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Now().Add(-2 * time.Minute))}}},
	}
	g.Expect(operatortest.Admin.Status().Update(ctx, pod)).To(Succeed())
	compiled := []string{"internal/goarch", "internal/abi", "runtime", "k8s.io/api/core/v1", "github.com/NVIDIA/gpu-operator/api/v1"}
	logged := "go: downloading k8s.io/api v0.34.0\ngo: downloading github.com/go-logr/logr v1.4.3\n" + strings.Join(compiled, "\n") + "\n"
	operatortest.PodLogs.Set(ns, pod.Name, build.ContainerBuild, logged)

	progress := func(n int) func(g Gomega, env *v1alpha1.DevEnvironment) {
		return func(g Gomega, env *v1alpha1.DevEnvironment) {
			api := env.Status.Component("api")
			g.Expect(api).NotTo(BeNil())
			g.Expect(api.Phase).To(Equal(v1alpha1.PhaseBuilding))
			g.Expect(api.Message).To(MatchRegexp(`building image api in job %s: %d packages compiled in 2m\d+s`, job.Name, n))
		}
	}
	env := operatortest.WaitForEnv(t, key, progress(len(compiled)))
	operatortest.ExpectKstatus(t, env, status.InProgressStatus)

	// The compile goes on: the count follows the log.
	more := []string{"make build-validator", "k8s.io/client-go/kubernetes", "sigs.k8s.io/controller-runtime/pkg/client", "# sigs.k8s.io/x", "PASS"}
	operatortest.PodLogs.Set(ns, pod.Name, build.ContainerBuild, logged+strings.Join(more, "\n")+"\n")
	env = operatortest.WaitForEnv(t, key, progress(len(compiled)+2))
	operatortest.ExpectKstatus(t, env, status.InProgressStatus)
	t.Log(fmt.Sprint(env.Status.Component("api").Message))
}

// TestWarmBuildProgressHasATotal (issue 42): during Volcano's cold compile
// (1,180 packages, 40 minutes on a busy machine) the message said "302
// packages compiled in 6m56s", with no end. For an image whose paths name
// its Go packages (go:cmd/api), the warm build's run step is asked to
// count their dependencies first, and the message says how many of them
// are compiled: "2 of 1180 packages compiled". An image without `go:`
// paths is not asked and keeps the count alone.
func TestWarmBuildProgressHasATotal(t *testing.T) {
	g := NewWithT(t)
	ns := operatortest.Namespace(t)
	operatortest.CreateDeployer(t, ns, operatortest.Deployer)
	operatortest.AppFiles(t, ns, map[string]string{"go.mod": "module example.com/api\n\ngo 1.22\n",
		"cmd/api/main.go": "package main // " + ns + "\nfunc main() {}\n"})
	operatortest.WarmExec.HangIn(ns)
	operatortest.WarmExec.Answer(func(_ []string, _, _ io.Writer) error { return nil })
	env := warmAPIEnv(ns)
	env.Spec.Components[0].Images[0].Run.Timeout = &metav1.Duration{Duration: time.Minute}
	env.Spec.Components[0].Images[0].Paths = []string{"go:cmd/api"}
	key := operatortest.CreateEnv(t, env)
	operatortest.RunPod(t, ns, warmAPIPod)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		api := env.Status.Component("api")
		g.Expect(api).NotTo(BeNil())
		g.Expect(api.Phase).To(Equal(v1alpha1.PhaseBuilding))
		g.Expect(api.Message).To(MatchRegexp(`building image api in warm builder \S+: 2 of 1180 packages compiled in \d+s`))
	})
	operatortest.ExpectKstatus(t, env, status.InProgressStatus)
	g.Expect(operatortest.WarmExec.CallsWith(`--count-packages ["./cmd/api"]`)).To(BeNumerically(">=", 1))
}

// TestBuilderJobProgressHasATotal (issue 42): a warm build says "305 of
// 816 packages compiled"; a builder Job said only "N packages compiled".
// For an image whose paths name its Go packages (go:cmd/api), the Job's
// build container runs the helper (installed into the tools volume) that
// counts their dependencies (go list -deps) once and then runs the build
// command in its place, and the message reads the total from the log:
// "2 of 1180 packages compiled".
func TestBuilderJobProgressHasATotal(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := operatortest.Namespace(t)
	operatortest.CreateDeployer(t, ns, operatortest.Deployer)
	operatortest.AppFiles(t, ns, map[string]string{"go.mod": "module example.com/api\n\ngo 1.22\n",
		"cmd/api/main.go": "package main // " + ns + "\nfunc main() {}\n"})
	env := amd64APIEnv(ns)
	env.Spec.Components[0].Images[0].Paths = []string{"go:cmd/api"}
	key := operatortest.CreateEnv(t, env)
	job := operatortest.WaitForBuilderJob(t, ns, "linux-amd64")
	inits := job.Spec.Template.Spec.InitContainers
	builder := inits[len(inits)-1]
	g.Expect(builder.Name).To(Equal(build.ContainerBuild))
	g.Expect(builder.Command).To(Equal(append([]string{pods.ToolsHelper, "helper", "count-packages", "--packages", `["./cmd/api"]`, "--"},
		env.Spec.Components[0].Images[0].Run.Command...)), "the helper counts, then runs the build command")
	g.Expect(inits).To(ContainElement(HaveField("Name", pods.ContainerInstall)), "the helper is installed for the build container")
	g.Expect(builder.VolumeMounts).To(ContainElement(HaveField("MountPath", pods.ToolsDir)))

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: job.Name + "-" + string(job.UID)[:5],
			Labels:          map[string]string{batchv1.JobNameLabel: job.Name},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(&job, batchv1.SchemeGroupVersion.WithKind("Job"))}},
		Spec: job.Spec.Template.Spec,
	}
	g.Expect(operatortest.Admin.Create(ctx, pod)).To(Succeed())
	pod.Status.Phase = corev1.PodPending
	pod.Status.InitContainerStatuses = []corev1.ContainerStatus{
		operatortest.Terminated(pods.ContainerFetch, 0, ""),
		operatortest.Terminated(pods.ContainerInstall, 0, ""),
		{Name: build.ContainerBuild, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Now().Add(-time.Minute))}}},
	}
	g.Expect(operatortest.Admin.Status().Update(ctx, pod)).To(Succeed())
	total := fmt.Sprintf("%s 1180 %s", build.PackagesTotalPrefix, build.PackagesTotalSuffix)
	operatortest.PodLogs.Set(ns, pod.Name, build.ContainerBuild, "go: downloading k8s.io/api v0.34.0\n"+total+"\ninternal/goarch\nruntime\n")

	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		api := env.Status.Component("api")
		g.Expect(api).NotTo(BeNil())
		g.Expect(api.Phase).To(Equal(v1alpha1.PhaseBuilding))
		g.Expect(api.Message).To(MatchRegexp(`building image api in job %s: 2 of 1180 packages compiled in 1m\d+s`, job.Name))
	})
	operatortest.ExpectKstatus(t, env, status.InProgressStatus)
}

package testrun_test

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	utilexec "k8s.io/client-go/util/exec"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/internal/pods"
	"github.com/devloop-dev/devloop/internal/teamcache"
	"github.com/devloop-dev/devloop/internal/testrun"
	"github.com/devloop-dev/devloop/test/builder"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// goBuilder is the builder (and unit-test) image of treeEnv.
const goBuilder = "golang:1.25"

// treeEnv is one Go tree's shape: image "api" built from the app source
// in goBuilder with a build cache, a unit suite in the same image on the
// same source with a cache (so it joins the image's claim), and a lint
// suite in another image with a cache of its own. It acts as the
// Deployer, so with the operator's team cache on its builders use it.
func treeEnv(ns string) *v1alpha1.DevEnvironment {
	api := v1alpha1.Component{Name: "api", Images: []v1alpha1.ImageSpec{{
		Name: "api", Source: builder.AppSource, Platforms: []string{"linux/amd64"},
		Run:    &v1alpha1.BuildRun{Image: goBuilder, Command: []string{"go", "build", "-o", "out/api", "./cmd/api"}, Cache: &v1alpha1.BuildCache{}},
		Layers: []v1alpha1.LayerMapping{{From: "out/api", To: "/api", Mode: "0755"}}, Entrypoint: []string{"/api"},
	}}}
	unit := v1alpha1.TestSuite{Name: "unit", Source: builder.AppSource, Image: v1alpha1.TestImage{Ref: goBuilder},
		Command: []string{"go", "test", "./..."}, Cache: &v1alpha1.TestCache{}}
	lint := v1alpha1.TestSuite{Name: "lint", Source: builder.AppSource, Image: v1alpha1.TestImage{Ref: "golangci/golangci-lint:v2"},
		Command: []string{"golangci-lint", "run"}, Cache: &v1alpha1.TestCache{}}
	return operatortest.Env(ns, "tree").Registry().AppSource().ServiceAccount(operatortest.Deployer).Components(api).Tests(unit, lint).Obj()
}

// containerOf is the named container (or init container) of a pod spec.
func containerOf(spec corev1.PodSpec, name string) *corev1.Container {
	for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
		if c.Name == name {
			return &c
		}
	}
	return nil
}

// testJobOf waits for run n of suite in ns and returns its Job.
func testJobOf(t *testing.T, env *v1alpha1.DevEnvironment, suite string) *batchv1.Job {
	t.Helper()
	_, run := operatortest.ExpectRun(t, env, suite, 1, v1alpha1.ResultRunning)
	return operatortest.WaitForJob(t, env.Namespace, run.JobName)
}

// TestSuiteOnItsImagesClaimUsesTheirGoCache (issue 34 item 3): with the
// team build cache on, builder pods' go keeps its cache through `helper
// gocacheprog` in a directory of the claim; the unit suite on the same
// claim runs the same program on the same directory (so its first run
// finds what they compiled), installed the same way, and reaches the team
// cache as the environment, with a token for the cache's audience in the
// test container only. A suite with a claim of its own has no
// GOCACHEPROG.
func TestSuiteOnItsImagesClaimUsesTheirGoCache(t *testing.T) {
	g := NewWithT(t)
	ns := operatortest.Namespace(t)
	operatortest.CreateDeployer(t, ns, operatortest.Deployer)
	operatortest.AppFiles(t, ns, map[string]string{"go.mod": "module example.com/tree\n", "cmd/api/main.go": "package main\n\nfunc main() {}\n"})
	env := treeEnv(ns)
	operatortest.CreateEnv(t, env)

	builder := operatortest.WaitForBuilderJob(t, ns, "linux-amd64")
	builderProg := lastValue(containerOf(builder.Spec.Template.Spec, build.ContainerBuild).Env, "GOCACHEPROG")
	g.Expect(builderProg).To(ContainSubstring(" --dir /home/devloop/.cache/devloop-gocache "), "the builders use the team cache here")
	// The build ends (failed: nothing pushed), so no builder Job runs
	// while the suites do.
	operatortest.EndJob(t, ns, builder.Name, false)

	operatortest.Annotate(t, env, v1alpha1.TriggerAnnotation, "unit")
	unit := testJobOf(t, env, "unit")
	spec := unit.Spec.Template.Spec
	test := containerOf(spec, testrun.ContainerTest)
	g.Expect(lastValue(test.Env, "GOCACHEPROG")).To(Equal(builderProg), "the suite's go uses the builders' cache program and directory")
	g.Expect(test.VolumeMounts).To(ContainElement(corev1.VolumeMount{Name: pods.VolumeTools, MountPath: pods.ToolsDir, ReadOnly: true}))
	install := containerOf(spec, pods.ContainerInstall)
	g.Expect(install).NotTo(BeNil(), "the helper binary is installed before the test")
	g.Expect(install.Args).To(Equal([]string{"helper", "install", "--to", pods.ToolsHelper}))
	g.Expect(spec.ServiceAccountName).To(Equal(operatortest.Deployer))
	g.Expect(*spec.AutomountServiceAccountToken).To(BeFalse(), "a suite that did not ask has no API token")
	var tokenVolume string
	for _, v := range spec.Volumes {
		if v.Projected != nil && v.Projected.Sources[0].ServiceAccountToken != nil {
			g.Expect(v.Projected.Sources[0].ServiceAccountToken.Audience).To(Equal(teamcache.DefaultAudience))
			tokenVolume = v.Name
		}
	}
	g.Expect(tokenVolume).NotTo(BeEmpty(), "a projected token for the build cache")
	for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
		mounted := false
		for _, m := range c.VolumeMounts {
			mounted = mounted || m.Name == tokenVolume
		}
		g.Expect(mounted).To(Equal(c.Name == testrun.ContainerTest), "container %s and the build cache token", c.Name)
	}

	operatortest.Annotate(t, env, v1alpha1.TriggerAnnotation, "lint")
	lint := testJobOf(t, env, "lint")
	g.Expect(lastValue(testEnvOf(lint), "GOCACHEPROG")).To(BeEmpty(), "a suite on a claim of its own")
	g.Expect(containerOf(lint.Spec.Template.Spec, pods.ContainerInstall)).To(BeNil())

	pvcs := &corev1.PersistentVolumeClaimList{}
	g.Expect(operatortest.Admin.List(context.Background(), pvcs, client.InNamespace(ns))).To(Succeed())
	g.Expect(pvcs.Items).To(HaveLen(2), "the images' claim (with unit) and lint's")
}

// TestSuiteAndBuildersOfOneClaimTakeTurns (issue 34 item 1, suites too):
// the unit suite, on its image's claim, does not start while the image's
// builder Job runs, and says for whom it waits; once it ended, the run
// starts. A builder Job of a new revision then waits for the suite's Job,
// saying so, and starts once it ended.
func TestSuiteAndBuildersOfOneClaimTakeTurns(t *testing.T) {
	g := NewWithT(t)
	ns := operatortest.Namespace(t)
	operatortest.CreateDeployer(t, ns, operatortest.Deployer)
	operatortest.AppFiles(t, ns, map[string]string{"cmd/api/main.go": "package main\n\nfunc main() {}\n"})
	env := treeEnv(ns)
	share, ok := pods.SuiteCacheShare(env, &env.Spec.Tests[0])
	g.Expect(ok).To(BeTrue())
	key := operatortest.CreateEnv(t, env)
	builder := operatortest.WaitForBuilderJob(t, ns, "linux-amd64")

	operatortest.Annotate(t, env, v1alpha1.TriggerAnnotation, "unit")
	operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		run := operatortest.RunOf(env, "unit", 1)
		g.Expect(run).NotTo(BeNil())
		g.Expect(run.Result).To(Equal(v1alpha1.ResultPending))
		g.Expect(env.Status.Test("unit").Message).To(Equal("run #1 is waiting for builder job " + builder.Name +
			" (image api), which shares build cache claim " + share.Claim + ": one compile at a time"))
	})
	// The pass that wrote that message would have made the Job instead.
	g.Expect(operatortest.TestJobNames(g, ns)).To(BeEmpty(), "the suite started while its image's builder ran")

	operatortest.EndJob(t, ns, builder.Name, false)
	unit := testJobOf(t, env, "unit")
	g.Expect(unit.Labels).To(HaveKeyWithValue(pods.LabelBuildCache, share.Claim))

	// A new revision: its builder Job waits for the suite's.
	operatortest.AppFiles(t, ns, map[string]string{"cmd/api/main.go": "package main\n\nfunc main() { println(2) }\n"})
	operatortest.RequestReconcile(t, env)
	operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.Components).NotTo(BeEmpty())
		g.Expect(env.Status.Components[0].Message).To(ContainSubstring("image api waits for test job " + unit.Name +
			" (suite unit), which shares build cache claim " + share.Claim + ": one compile at a time"))
	})
	g.Expect(operatortest.BuilderJobs(g, ns)["linux-amd64"].Name).To(Equal(builder.Name), "a builder Job started while the suite ran")

	operatortest.EndTestJob(t, unit, 0, "", "ok")
	g.Eventually(func(g Gomega) {
		g.Expect(operatortest.BuilderJobs(g, ns)["linux-amd64"].Name).NotTo(Equal(builder.Name))
	}, operatortest.Timeout).Should(Succeed())
}

// TestSuiteAndWarmBuildsOfOneClaimTakeTurns: with run.keepWarm the
// image's builds have no Job. The unit suite waits while status says the
// warm build runs, naming it, and starts once it ended; a warm build of a
// new revision waits for the suite's Job, saying so, and runs once it
// ended.
func TestSuiteAndWarmBuildsOfOneClaimTakeTurns(t *testing.T) {
	g := NewWithT(t)
	ns := operatortest.Namespace(t)
	operatortest.CreateDeployer(t, ns, operatortest.Deployer)
	operatortest.AppFiles(t, ns, map[string]string{"cmd/api/main.go": "package main\n\nfunc main() {}\n"})
	env := treeEnv(ns)
	env.Spec.Components[0].Images[0].Run.KeepWarm = true
	share, _ := pods.SuiteCacheShare(env, &env.Spec.Tests[0])
	var runs atomic.Int32
	hold := make(chan struct{})
	operatortest.WarmExec.Answer(func(command []string, stdout, stderr io.Writer) error {
		if !operatortest.IsStep(command, build.WarmStepRun) {
			return nil
		}
		runs.Add(1)
		<-hold
		// The build command fails: the build ends, nothing pushed.
		return utilexec.CodeExitError{Err: errors.New("command terminated with exit code 2"), Code: 2}
	})
	t.Cleanup(func() { operatortest.WarmExec.Answer(nil) })
	key := operatortest.CreateEnv(t, env)
	pod := build.WarmPodName(env.Name, "api", "linux/amd64")
	operatortest.RunPod(t, ns, pod)

	operatortest.Annotate(t, env, v1alpha1.TriggerAnnotation, "unit")
	operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(runs.Load()).To(BeEquivalentTo(1))
		g.Expect(env.Status.Test("unit")).NotTo(BeNil())
		g.Expect(env.Status.Test("unit").Message).To(Equal("run #1 is waiting for the build of image api (in " + pod +
			"), which shares build cache claim " + share.Claim + ": one compile at a time"))
	})
	g.Expect(operatortest.TestJobNames(g, ns)).To(BeEmpty(), "the suite started while its image's warm build ran")

	close(hold)
	unit := testJobOf(t, env, "unit")
	operatortest.AppFiles(t, ns, map[string]string{"cmd/api/main.go": "package main\n\nfunc main() { println(2) }\n"})
	operatortest.RequestReconcile(t, env)
	operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.Components).NotTo(BeEmpty())
		g.Expect(env.Status.Components[0].Message).To(ContainSubstring("image api waits for test job " + unit.Name +
			" (suite unit), which shares build cache claim " + share.Claim + ": one compile at a time"))
	})
	g.Expect(runs.Load()).To(BeEquivalentTo(1), "a warm build ran while the suite's Job did")

	operatortest.EndTestJob(t, unit, 0, "", "ok")
	g.Eventually(runs.Load, operatortest.Timeout).Should(BeEquivalentTo(2))
}

package testrun_test

import (
	"context"
	"strings"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/pods"
	"github.com/devloop-dev/devloop/test/builder"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// TestDependsOnGatesARun: a triggered suite waits, recorded as queued
// with the reason, until its component is Ready and the suite it names
// (a tooling install) has passed; then it starts by itself.
func TestDependsOnGatesARun(t *testing.T) {
	g := NewWithT(t)
	ns := operatortest.RunnerNamespace(t)
	operatortest.ScriptedDeploy.Set(ns, "api", v1alpha1.PhaseDeploying, nil)
	env := operatortest.Env(ns, "deps").ServiceAccount(operatortest.Runner).Source(operatortest.SharedOCISource()).Components(operatortest.ScriptedComponent("api")).
		Suites(builder.Suite("tools"), builder.Suite("e2e").After("api", "tools")).Create(t, operatortest.Admin)
	key := client.ObjectKeyFromObject(env)

	operatortest.Annotate(t, env, v1alpha1.TriggerAnnotation, "e2e")
	operatortest.ExpectRun(t, env, "e2e", 1, v1alpha1.ResultPending)
	// The first reconciles may see api before the engine reports it.
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(operatortest.RunOf(env, "e2e", 1).Message).To(Equal("waiting for component api to be Ready (it is Deploying), suite tools to pass (it has not run; trigger it)"))
		g.Expect(env.Status.Test("e2e").Message).To(HavePrefix("run #1 is waiting for component api"))
	})
	g.Expect(operatortest.TestJobNames(g, ns)).To(BeEmpty())
	operatortest.ExpectKstatus(t, env, status.InProgressStatus) // api is still rolling out

	// api becomes Ready: e2e still waits for tools.
	operatortest.ScriptedDeploy.Set(ns, "api", v1alpha1.PhaseReady, nil)
	operatortest.RequestReconcile(t, env)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		g.Expect(operatortest.RunOf(env, "e2e", 1).Message).To(Equal("waiting for suite tools to pass (it has not run; trigger it)"))
	})

	// tools runs and fails: e2e keeps waiting and says so.
	operatortest.Annotate(t, env, v1alpha1.TriggerAnnotation, "tools")
	operatortest.ExpectRun(t, env, "tools", 1, v1alpha1.ResultRunning)
	operatortest.EndTestJob(t, operatortest.WaitForJob(t, ns, "deps-tools-1"), 1, "BackoffLimitExceeded", "install failed\n")
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(operatortest.RunOf(env, "e2e", 1).Message).To(Equal("waiting for suite tools to pass (run #1 is Failed)"))
	})

	// tools passes on its second run: e2e starts without being asked again.
	operatortest.Annotate(t, env, v1alpha1.TriggerAnnotation, "tools")
	operatortest.ExpectRun(t, env, "tools", 2, v1alpha1.ResultRunning)
	operatortest.EndTestJob(t, operatortest.WaitForJob(t, ns, "deps-tools-2"), 0, "", "installed\n")
	env, run := operatortest.ExpectRun(t, env, "e2e", 1, v1alpha1.ResultRunning)
	g.Expect(run.Message).To(BeEmpty())
	g.Expect(env.Status.Test("e2e").Message).To(BeEmpty())
	operatortest.WaitForJob(t, ns, "deps-e2e-1")
	operatortest.ExpectReadyCurrent(t, env)
}

// TestOnChangeRunsOncePerDigestSet: an OnChange suite testing a built
// image runs after its component is Ready, once per set of digests: a
// reconcile with the same digests starts nothing, a new build does.
func TestOnChangeRunsOncePerDigestSet(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := operatortest.RunnerNamespace(t)
	srcDigest := operatortest.AppFiles(t, ns, operatortest.WebFiles("binary v1"))
	env := operatortest.WebTestsEnv(ns, builder.BuiltSuite("smoke", "web", "/web", "--self-test").After("web").OnChange())
	g.Expect(operatortest.Admin.Create(ctx, env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)

	env, run := operatortest.ExpectRun(t, env, "smoke", 1, v1alpha1.ResultRunning)
	img := env.Status.Component("web").Image("web")
	g.Expect(run.Trigger).To(Equal("OnChange"))
	g.Expect(run.Images).To(Equal(map[string]string{"web": img.Digest}))
	job := operatortest.WaitForJob(t, ns, "web-smoke-1")
	pod := job.Spec.Template.Spec
	g.Expect(pod.Containers[0].Image).To(Equal(operatortest.Registry.Host + "/" + ns + "/web@" + img.Digest))
	g.Expect(pod.InitContainers).To(HaveLen(1))
	g.Expect(pod.InitContainers[0].Name).To(Equal(pods.ContainerFetch))
	g.Expect(pod.InitContainers[0].Image).To(Equal(operatortest.HelperImage))
	g.Expect(strings.Join(pod.InitContainers[0].Args, " ")).To(ContainSubstring(srcDigest.String()), "the resolved source")
	operatortest.EndTestJob(t, job, 0, "", "self-test ok\n")
	env, _ = operatortest.ExpectRun(t, env, "smoke", 1, v1alpha1.ResultPassed)
	set := env.Status.Test("smoke").DigestSet
	g.Expect(set).NotTo(BeEmpty())

	// Same digests: nothing new.
	request := operatortest.RequestReconcile(t, env)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.LastHandledReconcileAt).To(Equal(request))
		operatortest.ExpectReadyAndCurrent(g, env)
	})
	g.Expect(operatortest.RunNumbers(env, "smoke")).To(Equal([]int64{1}))

	// A new build: a new run, testing the new digest.
	operatortest.AppFiles(t, ns, operatortest.WebFiles("binary v2"))
	operatortest.RequestReconcile(t, env)
	env, run = operatortest.ExpectRun(t, env, "smoke", 2, v1alpha1.ResultRunning)
	g.Expect(run.Images["web"]).NotTo(Equal(img.Digest))
	g.Expect(run.Images["web"]).To(Equal(env.Status.Component("web").Image("web").Digest))
	g.Expect(env.Status.Test("smoke").DigestSet).NotTo(Equal(set))
	operatortest.ExpectReadyCurrent(t, env)
}

// TestTestJobDeniedNamesTheServiceAccount: test Jobs are created as the
// environment's ServiceAccount; one without the right gets an Error run
// that says who may not do what, and the environment stays Ready.
func TestTestJobDeniedNamesTheServiceAccount(t *testing.T) {
	g := NewWithT(t)
	ns := operatortest.Namespace(t)
	operatortest.CreateServiceAccount(t, ns, "nobody")
	env := operatortest.TestsEnv(t, ns, builder.Suite("unit")).ServiceAccount("nobody").Create(t, operatortest.Admin)

	operatortest.Annotate(t, env, v1alpha1.TriggerAnnotation, "unit")
	env, run := operatortest.ExpectRun(t, env, "unit", 1, v1alpha1.ResultError)
	g.Expect(run.Message).To(ContainSubstring("cannot create job tests-unit-1 as system:serviceaccount:" + ns + ":nobody"))
	g.Expect(run.Message).To(ContainSubstring("forbidden"))
	g.Expect(operatortest.TestJobNames(g, ns)).To(BeEmpty())
	operatortest.ExpectEvent(t, ns, v1alpha1.ReasonTestFailed, "unit #1 Error: cannot create job")
	operatortest.ExpectReadyCurrent(t, env)
}

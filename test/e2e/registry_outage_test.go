//go:build e2e

package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/internal/testregistry"
	. "github.com/devloop-dev/devloop/test/builder"
	. "github.com/devloop-dev/devloop/test/e2e/fixture"
	"github.com/devloop-dev/devloop/test/e2e/poll"
)

// outageRegistryHost is the address of the registry these cases stop: on
// the node address, so builder pods reach it, on a port of its own (the
// faults case uses 5001; the long outages 5003 and 5004), so the outage
// cases run in parallel with the rest.
const outageRegistryHost = "10.250.0.1:5002"

// outageRegistry is a registry the case stops and starts again at the same
// address with what it held.
type outageRegistry struct {
	t    *testing.T
	host string
	dir  string
	p    *testregistry.Process
}

// startOutageRegistry runs the registry; it is stopped when the test ends,
// whatever state the test left it in, so no later case finds it.
func startOutageRegistry(t *testing.T, host string) *outageRegistry {
	t.Helper()
	r := &outageRegistry{t: t, host: host, dir: t.TempDir()}
	r.start()
	t.Cleanup(func() {
		if r.p != nil {
			r.p.Stop()
		}
	})
	return r
}

func (r *outageRegistry) start() {
	r.t.Helper()
	p, err := testregistry.RunAt(r.dir, r.host)
	if err != nil {
		r.t.Fatal(err)
	}
	r.p = p
}

func (r *outageRegistry) stop() {
	r.p.Stop()
	r.p = nil
}

// waitingForTheRegistry waits until the environment says it waits for the
// registry: Ready=False with reason Waiting and Reconciling=True (kstatus
// InProgress), never Stalled on the way (waitEnv fails at once if it is).
func waitingForTheRegistry(t *testing.T, key client.ObjectKey, words ...string) *v1alpha1.DevEnvironment {
	t.Helper()
	env := waitEnv(t, key, 2*time.Minute, false, func(g Gomega, env *v1alpha1.DevEnvironment) {
		ready := meta.FindStatusCondition(env.Status.Conditions, v1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Reason).To(Equal(v1alpha1.ReasonWaiting))
		for _, w := range words {
			g.Expect(conditionMessages(env)).To(ContainSubstring(w))
		}
		g.Expect(meta.IsStatusConditionTrue(env.Status.Conditions, v1alpha1.ConditionReconciling)).To(BeTrue())
		g.Expect(meta.IsStatusConditionTrue(env.Status.Conditions, v1alpha1.ConditionStalled)).To(BeFalse())
	})
	t.Logf("registry down: Ready=False %s; conditions:\n%s", v1alpha1.ReasonWaiting, conditionMessages(env))
	return env
}

// healsAfterReturn starts the registry again and waits for Ready with no
// other help; it prints how long that took after the registry answered.
// The bound is generous (issues 32 and 43 ask for about 30 s; the figure
// printed is the one to read): a loaded CI machine must not make the case
// flaky.
func healsAfterReturn(t *testing.T, r *outageRegistry, key client.ObjectKey) *v1alpha1.DevEnvironment {
	t.Helper()
	r.start()
	back := time.Now()
	env := waitEnv(t, key, 90*time.Second, false, func(g Gomega, env *v1alpha1.DevEnvironment) {
		readyNow(g, env)
		g.Expect(imageOf(env, "app")).NotTo(BeNil())
		g.Expect(imageOf(env, "app").Digest).NotTo(BeEmpty())
		g.Expect(imageOf(env, "app").Build).NotTo(BeNil())
	})
	img := imageOf(env, "app")
	t.Logf("registry back: Ready %s after its return (issue 43 asks for about 30 s), %s@%s by %s, with no change to the environment",
		time.Since(back).Round(100*time.Millisecond), img.Repository, img.Digest, img.Build.Job)
	NewWithT(t).Expect(img.Repository).To(HavePrefix(r.host + "/"))
	return env
}

// TestRegistryOutageDuringABuildHeals is issue 32 item 1 on the real
// cluster: the registry images are pushed to is stopped while a builder
// Job runs its build command, and while a warm builder runs one. The
// environment waits (Ready=False, Waiting; never Stalled) and is Ready
// again once the registry is back, with nothing done to it: the Job's
// assemble container, which waited for the registry, pushes (the Job is
// not replaced); the warm build pushes again.
func TestRegistryOutageDuringABuildHeals(t *testing.T) {
	c := need(t)
	t.Parallel() // its registry is its own; it only waits
	ctx := context.Background()
	ns := namespace(t, "e2e-outage")
	dir := sourceDir(t, Files{"bin/app": "#!/bin/sh\necho app\n"})
	pushDir(t, newEnv(ns, "source").Build(), dir)
	// The build command takes a few seconds, so the registry is stopped
	// while it runs and the step after it (assemble, push) finds it down.
	slowBuild := func(seconds string) *v1alpha1.BuildRun {
		return &v1alpha1.BuildRun{Image: busybox, Command: []string{"sh", "-c",
			"sleep " + seconds + " && mkdir -p out && cp bin/app out/app"}}
	}

	t.Run("builder job", func(t *testing.T) {
		g := NewWithT(t)
		r := startOutageRegistry(t, outageRegistryHost)
		env := newEnv(ns, "job-outage").ImagePrefix(r.host + "/" + ns).Components(
			Component("app", Images(Image("app", Run(slowBuild("12")), Program("out/app", "/app"))))).Build()
		g.Expect(c.Client.Create(ctx, env)).To(Succeed())
		key := client.ObjectKeyFromObject(env)

		// The registry stops once the Job's build command runs.
		var job string
		var jobUID types.UID
		waitPods(t, poll.Wait{What: "a builder pod running its build command", Every: 100 * time.Millisecond, Within: 3 * time.Minute},
			ns, map[string]string{v1alpha1.LabelRole: v1alpha1.RoleBuild}, func(g Gomega, pods []corev1.Pod) {
				i := slices.IndexFunc(pods, func(p corev1.Pod) bool { return buildCommandRuns(p.Status.InitContainerStatuses) })
				g.Expect(i).To(BeNumerically(">=", 0), "no builder pod runs its build container")
				owner := metav1.GetControllerOf(&pods[i])
				g.Expect(owner).NotTo(BeNil())
				job, jobUID = owner.Name, owner.UID
			})
		r.stop()
		t.Logf("registry stopped while builder job %s ran its build command", job)

		waiting := waitingForTheRegistry(t, key, "registry was unavailable", "container "+build.ContainerAssemble)
		if b := imageOf(waiting, "app").Build; b != nil {
			t.Logf("image status while down: result %s, exit code %v", b.Result, ptrString(b.ExitCode))
		}
		env = healsAfterReturn(t, r, key)
		g.Expect(imageOf(env, "app").Build.Result).To(Equal(v1alpha1.BuildSucceeded))
		// The Job's assemble container waited for the registry and pushed
		// what it had built: the same Job succeeded, never replaced, so
		// its build command ran once.
		same := &batchv1.Job{}
		g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: job}, same)).To(Succeed())
		g.Expect(same.UID).To(Equal(jobUID), "the builder job was replaced: its build command ran again")
		g.Expect(same.Status.Succeeded).To(BeEquivalentTo(1))
	})

	t.Run("warm build", func(t *testing.T) {
		g := NewWithT(t)
		r := startOutageRegistry(t, outageRegistryHost)
		// The command is not run again after the outage (only the push
		// is), so it can leave a wide margin to stop the registry in.
		run := slowBuild("25")
		run.KeepWarm = true
		env := newEnv(ns, "warm-outage").ImagePrefix(r.host + "/" + ns).Components(
			Component("app", Images(Image("app", Run(run), Program("out/app", "/app"))))).Build()
		g.Expect(c.Client.Create(ctx, env)).To(Succeed())
		key := client.ObjectKeyFromObject(env)

		// The registry stops once status says the warm builder builds.
		building := waitEnv(t, key, 3*time.Minute, false, func(g Gomega, env *v1alpha1.DevEnvironment) {
			g.Expect(conditionMessages(env)).To(ContainSubstring("building image app in warm builder"))
		})
		r.stop()
		t.Logf("registry stopped while: %s", conditionMessages(building))

		waitingForTheRegistry(t, key, "registry was unavailable", "push step", "warm builder")
		env = healsAfterReturn(t, r, key)
		g.Expect(imageOf(env, "app").Build.Result).To(Equal(v1alpha1.BuildSucceeded))
	})
}

// buildCommandRuns reports whether a builder pod's build container (an
// init container, after fetch) is running.
func buildCommandRuns(statuses []corev1.ContainerStatus) bool {
	i := slices.IndexFunc(statuses, func(s corev1.ContainerStatus) bool { return s.Name == build.ContainerBuild })
	return i >= 0 && statuses[i].State.Running != nil
}

// conditionMessages is every condition's message and every component's,
// one a line: what status says the environment does or waits for.
func conditionMessages(env *v1alpha1.DevEnvironment) string {
	var b strings.Builder
	for _, c := range env.Status.Conditions {
		b.WriteString(c.Type + ": " + c.Message + "\n")
	}
	for _, c := range env.Status.Components {
		b.WriteString("component " + c.Name + " (" + string(c.Phase) + "): " + c.Message + "\n")
	}
	return b.String()
}

func ptrString(p *int32) any {
	if p == nil {
		return "none"
	}
	return *p
}

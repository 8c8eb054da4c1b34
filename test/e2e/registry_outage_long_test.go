//go:build e2e

package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/build"
	. "github.com/devloop-dev/devloop/test/builder"
	. "github.com/devloop-dev/devloop/test/e2e/fixture"
	"github.com/devloop-dev/devloop/test/e2e/poll"
)

// TestRegistryOutageOf60sHeals and TestRegistryOutageOf5MinutesHeals are
// issue 43's outage item: the registry stops while a builder Job runs its
// build command and stays down for 60 s or 5 minutes; the environment
// waits on its own retry schedule (Ready=False, Waiting; never Stalled,
// even after 5 minutes) and is Ready again soon after the registry is
// back, with no help. How soon is printed (issue 43 asks for about 30 s);
// what is asserted is a generous bound (90 s), so a loaded machine does
// not make the case flaky. Each case has a registry of its own, on a port
// of its own, and runs in parallel with the rest of the suite: the five
// minutes it waits add nothing to make e2e's wall time.
func TestRegistryOutageOf60sHeals(t *testing.T) {
	outageDuringABuilderJobHeals(t, "10.250.0.1:5003", "e2e-outage60", time.Minute)
}

func TestRegistryOutageOf5MinutesHeals(t *testing.T) {
	longCase(t)
	outageDuringABuilderJobHeals(t, "10.250.0.1:5004", "e2e-outage300", 5*time.Minute)
}

func outageDuringABuilderJobHeals(t *testing.T, host, prefix string, downFor time.Duration) {
	c := need(t)
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t, prefix)
	dir := sourceDir(t, Files{"bin/app": "#!/bin/sh\necho app\n"})
	pushDir(t, newEnv(ns, "source").Build(), dir)
	r := startOutageRegistry(t, host)
	// The build command takes a few seconds, so the registry is stopped
	// while it runs and the push after it finds it down.
	env := newEnv(ns, "app").ImagePrefix(host + "/" + ns).Components(
		Component("app", Images(Image("app", Run(&v1alpha1.BuildRun{Image: busybox, Command: []string{"sh", "-c",
			"sleep 12 && mkdir -p out && cp bin/app out/app"}}), Program("out/app", "/app"))))).Build()
	g.Expect(c.Client.Create(ctx, env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)

	waitPods(t, poll.Wait{What: "a builder pod running its build command", Every: 100 * time.Millisecond, Within: 5 * time.Minute},
		ns, map[string]string{v1alpha1.LabelRole: v1alpha1.RoleBuild}, func(g Gomega, pods []corev1.Pod) {
			g.Expect(slices.ContainsFunc(pods, func(p corev1.Pod) bool { return buildCommandRuns(p.Status.InitContainerStatuses) })).
				To(BeTrue(), "no builder pod runs its build container")
		})
	r.stop()
	stopped := time.Now()
	t.Logf("registry %s stopped while a builder job ran its build command; down for %s", host, downFor)

	waitingForTheRegistry(t, key, "registry was unavailable", "container "+build.ContainerAssemble)
	// The outage lasts its full length; then the environment must still be
	// waiting for the registry, not Stalled (waitingForTheRegistry fails at
	// once on Stalled), however many times it retried meanwhile.
	time.Sleep(time.Until(stopped.Add(downFor)))
	waitingForTheRegistry(t, key, "unavailable")
	env = healsAfterReturn(t, r, key)
	g.Expect(imageOf(env, "app").Build.Result).To(Equal(v1alpha1.BuildSucceeded))
}

//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	. "github.com/devloop-dev/devloop/test/builder"
	. "github.com/devloop-dev/devloop/test/e2e/fixture"
)

// migrateJob is an init Job that exits with code: 1 fails it for good
// (no retries), 0 completes it.
func migrateJob(code string) string {
	return `apiVersion: batch/v1
kind: Job
metadata: {name: migrate}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      ` + restrictedPod + `
      containers:
      - name: migrate
        image: ` + busybox + `
        command: ["sh", "-c", "exit ` + code + `"]
        ` + restrictedContainer + `
`
}

// TestDiamondWithAFailingJob is the DAG on the real cluster: a → (b, c)
// → d, c an init Job that fails. b is deployed and Ready, c Failed naming
// its Job, d Blocked on c, the environment Stalled; a fixed Job (its pod
// template changed) is replaced, completes, and d follows without a
// nudge.
func TestDiamondWithAFailingJob(t *testing.T) {
	c := need(t)
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t, "e2e-dag")
	dir := sourceDir(t, Files{
		"a/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {a: a}\n",
		"b/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\ndata: {b: b}\n",
		"c/job.yaml":    migrateJob("1"),
		"d/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: d}\ndata: {d: d}\n",
	})
	part := func(name string, deps ...string) v1alpha1.Component {
		return Component(name, DependsOn(deps...), Manifests(name))
	}
	// Declared with d and c first: the order must not matter.
	env := newEnv(ns, "diamond").Components(part("d", "b", "c"), part("c", "a"), part("b", "a"), part("a")).Build()
	pushDir(t, env, dir)
	g.Expect(c.ApplyEnvironment(ctx, env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)
	started := time.Now()
	got := waitEnv(t, key, 3*time.Minute, true, func(g Gomega, env *v1alpha1.DevEnvironment) {
		for _, name := range []string{"a", "b", "c", "d"} {
			g.Expect(componentOf(env, name)).NotTo(BeNil(), "component %s has a status", name)
		}
		g.Expect(componentOf(env, "b").Phase).To(Equal(v1alpha1.PhaseReady))
		g.Expect(componentOf(env, "c").Phase).To(Equal(v1alpha1.PhaseFailed))
		g.Expect(componentOf(env, "c").Message).To(ContainSubstring("jobs.batch/migrate"))
		d := componentOf(env, "d")
		g.Expect(d.Phase).To(Equal(v1alpha1.PhaseBlocked))
		g.Expect(d.WaitingFor).To(Equal([]string{"c"}))
		g.Expect(meta.IsStatusConditionTrue(env.Status.Conditions, v1alpha1.ConditionStalled)).To(BeTrue())
	})
	t.Logf("failing Job reported in %s: %s", time.Since(started).Round(time.Millisecond),
		meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionStalled).Message)

	writeFiles(t, dir, Files{"c/job.yaml": migrateJob("0")})
	pushDir(t, env, dir)
	_ = requestReconcile(t, env)
	fixed := time.Now()
	waitEnv(t, key, 3*time.Minute, true, readyNow)
	t.Logf("fixed Job replaced and the whole diamond Ready in %s", time.Since(fixed).Round(time.Millisecond))
}

// TestWrongPullPrefixIsNamed: registry.pullPrefix set to a full
// repository makes every pull of the built image fail; status names the
// pod, the image, the pull error and the field within 30 s.
func TestWrongPullPrefixIsNamed(t *testing.T) {
	c := need(t)
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t, "e2e-pull")
	wrong := registry + "/" + ns + "/app" // a repository, not a prefix
	env := newEnv(ns, "pull").PullPrefix(wrong).Components(Component("app",
		Images(Image("app", Base(busybox), Program("bin/app", "/app"))), Manifests("deploy"))).Build()
	pushDir(t, env, sourceDir(t, Files{
		"bin/app":         "#!/bin/sh\necho app\n",
		"deploy/app.yaml": Deployment("app", "app", "image: app"),
	}))
	g.Expect(c.ApplyEnvironment(ctx, env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)
	// Built and applied first; from then on the pull fails.
	applied := waitEnv(t, key, 3*time.Minute, false, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(componentOf(env, "app")).NotTo(BeNil())
		g.Expect(componentOf(env, "app").Phase).To(Equal(v1alpha1.PhaseDeploying))
	})
	since := time.Now()
	got := waitEnv(t, key, 30*time.Second, false, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(componentOf(env, "app")).NotTo(BeNil())
		msg := componentOf(env, "app").Message
		g.Expect(msg).To(MatchRegexp(`pod app-\S+: container app \(image ` + wrong + `/app@sha256:[0-9a-f]+\): (ErrImagePull|ImagePullBackOff)`))
		g.Expect(msg).To(ContainSubstring("spec.registry.pullPrefix"))
	})
	t.Logf("pull error named %s after the deploy (%s): %s", time.Since(since).Round(time.Millisecond), applied.Name, componentOf(got, "app").Message)
}

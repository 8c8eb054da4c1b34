//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testregistry"
	. "github.com/devloop-dev/devloop/test/builder"
	. "github.com/devloop-dev/devloop/test/e2e/fixture"
)

// TestBadInputAndFaults is end-to-end case 5: each bad input or fault is
// a clear condition where users look, and a registry coming back heals the
// environment without help.
func TestBadInputAndFaults(t *testing.T) {
	c := need(t)
	ctx := context.Background()
	ns := namespace(t, "e2e-faults")
	// A source holding a prebuilt "binary", a manifest and no chart.
	dir := sourceDir(t, Files{
		"bin/app":            "#!/bin/sh\necho app\n",
		"deploy/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {a: b}\n",
	})
	base := func(name string) *EnvSpec { return newEnv(ns, name).Registry() }
	pushDir(t, base("source").Build(), dir) // the one source every case below reads
	stalledWith := func(t *testing.T, env *v1alpha1.DevEnvironment, reason string, words ...string) {
		t.Helper()
		NewWithT(t).Expect(c.ApplyEnvironment(ctx, env)).To(Succeed())
		got := waitEnv(t, client.ObjectKeyFromObject(env), 2*time.Minute, true, func(g Gomega, env *v1alpha1.DevEnvironment) {
			g.Expect(env.Status.ObservedGeneration).To(Equal(env.Generation))
			s := meta.FindStatusCondition(env.Status.Conditions, v1alpha1.ConditionStalled)
			g.Expect(s).NotTo(BeNil())
			g.Expect(s.Reason).To(Equal(reason))
			for _, w := range words {
				g.Expect(s.Message).To(ContainSubstring(w))
			}
		})
		t.Logf("%s: %s", got.Name, meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionStalled).Message)
	}

	t.Run("dependency cycle", func(t *testing.T) {
		env := base("cycle").Components(
			Component("a", DependsOn("b"), Manifests("deploy")),
			Component("b", DependsOn("a"), Manifests("deploy"))).Build()
		stalledWith(t, env, v1alpha1.ReasonDependencyCycle, "dependency cycle", "a -> b -> a")
	})

	t.Run("missing chart path", func(t *testing.T) {
		env := base("nochart").Components(Component("web", Chart("charts/web"))).Build()
		stalledWith(t, env, v1alpha1.ReasonDeployFailed, "charts/web")
	})

	t.Run("service account without rights", func(t *testing.T) {
		NewWithT(t).Expect(createServiceAccount(ctx, ns, "nobody")).To(Succeed())
		env := base("norights").ServiceAccount("nobody").Components(Component("config", Manifests("deploy"))).Build()
		stalledWith(t, env, v1alpha1.ReasonDeployFailed, "forbidden", "configmaps", "system:serviceaccount:"+ns+":nobody")
	})

	t.Run("unreachable registry, then back", func(t *testing.T) {
		g := NewWithT(t)
		// A second registry on the node address that pods reach, stopped
		// while the environment needs it.
		regDir := t.TempDir()
		host := "10.250.0.1:5001"
		r, err := testregistry.RunAt(regDir, host)
		g.Expect(err).NotTo(HaveOccurred())
		r.Stop()
		env := base("registry-down").ImagePrefix(host + "/" + ns).Components(
			Component("app", Images(Image("app", Program("bin/app", "/app"))))).Build()
		g.Expect(c.ApplyEnvironment(ctx, env)).To(Succeed())
		key := client.ObjectKeyFromObject(env)
		waiting := waitEnv(t, key, 2*time.Minute, false, func(g Gomega, env *v1alpha1.DevEnvironment) {
			ready := meta.FindStatusCondition(env.Status.Conditions, v1alpha1.ConditionReady)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Reason).To(Equal(v1alpha1.ReasonWaiting))
			g.Expect(ready.Message).To(ContainSubstring(host))
			g.Expect(meta.IsStatusConditionTrue(env.Status.Conditions, v1alpha1.ConditionReconciling)).To(BeTrue())
		})
		t.Logf("registry down: Ready=False %s: %s", v1alpha1.ReasonWaiting, meta.FindStatusCondition(waiting.Status.Conditions, v1alpha1.ConditionReady).Message)
		back := time.Now()
		r, err = testregistry.RunAt(regDir, host)
		g.Expect(err).NotTo(HaveOccurred())
		defer r.Stop()
		env = waitEnv(t, key, 3*time.Minute, false, readyNow)
		t.Logf("registry back: Ready %s later, %s pushed, with no change to the environment", time.Since(back).Round(time.Millisecond), imageOf(env, "app").Digest)
	})
}

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
	"github.com/devloop-dev/devloop/internal/devcluster"
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
      securityContext: {runAsNonRoot: true, runAsUser: 65532, seccompProfile: {type: RuntimeDefault}}
      containers:
      - name: migrate
        image: ` + registry + `/busybox:1.35
        command: ["sh", "-c", "exit ` + code + `"]
        securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
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
	dir := t.TempDir()
	files := map[string]string{
		"a/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {a: a}\n",
		"b/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\ndata: {b: b}\n",
		"c/job.yaml":    migrateJob("1"),
		"d/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: d}\ndata: {d: d}\n",
	}
	writeFiles(t, dir, files)
	srcRepo := registry + "/" + ns + "/src"
	_, err := devcluster.PushSource(ctx, dir, srcRepo+":dev")
	g.Expect(err).NotTo(HaveOccurred())
	part := func(name string, deps ...string) v1alpha1.Component {
		return v1alpha1.Component{Name: name, DependsOn: deps, Manifests: &v1alpha1.ManifestsSpec{Source: "app", Paths: []string{name}}}
	}
	env := &v1alpha1.DevEnvironment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "diamond"},
		Spec: v1alpha1.DevEnvironmentSpec{
			ServiceAccountName: "deployer",
			Sources:            []v1alpha1.Source{{Name: "app", OCI: &v1alpha1.OCISource{Repository: srcRepo, Tag: "dev", Insecure: true}}},
			// Declared with d and c first: the order must not matter.
			Components: []v1alpha1.Component{part("d", "b", "c"), part("c", "a"), part("b", "a"), part("a")},
		},
	}
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

	writeFiles(t, dir, map[string]string{"c/job.yaml": migrateJob("0")})
	_, err = devcluster.PushSource(ctx, dir, srcRepo+":dev")
	g.Expect(err).NotTo(HaveOccurred())
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
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"bin/app": "#!/bin/sh\necho app\n",
		"deploy/app.yaml": `apiVersion: apps/v1
kind: Deployment
metadata: {name: app}
spec:
  selector: {matchLabels: {app: app}}
  template:
    metadata: {labels: {app: app}}
    spec:
      securityContext: {runAsNonRoot: true, runAsUser: 65532, seccompProfile: {type: RuntimeDefault}}
      containers:
      - name: app
        image: app
        securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
`,
	})
	srcRepo := registry + "/" + ns + "/src"
	_, err := devcluster.PushSource(ctx, dir, srcRepo+":dev")
	g.Expect(err).NotTo(HaveOccurred())
	wrong := registry + "/" + ns + "/app" // a repository, not a prefix
	env := &v1alpha1.DevEnvironment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pull"},
		Spec: v1alpha1.DevEnvironmentSpec{
			ServiceAccountName: "deployer",
			Registry:           &v1alpha1.RegistrySpec{Prefix: registry + "/" + ns, PullPrefix: wrong, Insecure: true},
			Sources:            []v1alpha1.Source{{Name: "app", OCI: &v1alpha1.OCISource{Repository: srcRepo, Tag: "dev", Insecure: true}}},
			Components: []v1alpha1.Component{{Name: "app",
				Images: []v1alpha1.ImageSpec{{Name: "app", Source: "app", Base: registry + "/busybox:1.35",
					Layers: []v1alpha1.LayerMapping{{From: "bin/app", To: "/app", Mode: "0755"}}, Entrypoint: []string{"/app"}}},
				Manifests: &v1alpha1.ManifestsSpec{Source: "app", Paths: []string{"deploy"}}}},
		},
	}
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

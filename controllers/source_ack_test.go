package controllers

import (
	"context"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// ackWithin is how soon a pushed revision must show in status while a
// Helm action is in flight (issue 18 item 13: a push waited 76 s).
const ackWithin = 5 * time.Second

// TestNewRevisionIsAcknowledgedWhileAHelmInstallWaitsOnItsHook: one
// component's release waits on a pre-install hook Job that does not end
// (envtest has no kubelet), up to its two-minute timeout. A push of a new
// source revision meanwhile is acknowledged — status.sources at the new
// digest, the reconcile request echoed, as `kubectl devloop push` waits
// for — within seconds, and the environment's other component rolls the
// new revision out; the install stays pending all along and the
// environment reads InProgress. When the hook completes, the install's
// outcome is taken up and the environment is Ready.
func TestNewRevisionIsAcknowledgedWhileAHelmInstallWaitsOnItsHook(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	useDeployEngine(ns)
	deployer(t, ns, "deployer", true)
	files := chartFiles(t, "installhook", "chart")
	files["deploy/config.yaml"] = appConfig("1")
	reg.pushSource(t, ns+"/src", "dev", files)
	env := &v1alpha1.DevEnvironment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "acks"},
		Spec: v1alpha1.DevEnvironmentSpec{
			ServiceAccountName: "deployer",
			Sources: []v1alpha1.Source{{Name: "app", OCI: &v1alpha1.OCISource{
				Repository: reg.host + "/" + ns + "/src", Tag: "dev", Insecure: true}}},
			Components: []v1alpha1.Component{
				{Name: "hooked", Helm: &v1alpha1.HelmSpec{
					Chart:   v1alpha1.ChartRef{Source: "app", Path: "chart"},
					Timeout: &metav1.Duration{Duration: 2 * time.Minute},
				}},
				{Name: "config", Manifests: &v1alpha1.ManifestsSpec{Source: "app", Paths: []string{"deploy"}}},
			},
		},
	}
	g.Expect(k8s.Create(ctx, env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)
	hook := client.ObjectKey{Namespace: ns, Name: "hooked-setup"}
	g.Eventually(func() error { return k8s.Get(ctx, hook, &batchv1.Job{}) }, timeout, 50*time.Millisecond).Should(Succeed(), "Helm runs the pre-install hook")
	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(componentOf(env, "config")).NotTo(BeNil())
		g.Expect(componentOf(env, "config").Phase).To(Equal(v1alpha1.PhaseReady))
		hooked := componentOf(env, "hooked")
		g.Expect(hooked).NotTo(BeNil())
		g.Expect(hooked.Phase).To(Equal(v1alpha1.PhaseDeploying))
		g.Expect(hooked.Message).To(ContainSubstring("helm install of release " + ns + "/hooked in progress"))
	})
	expectKstatus(t, env, status.InProgressStatus)
	g.Expect(configVersion(t, ns)).To(Equal("1"))

	// The push: new content, and the reconcile request the plugin writes.
	files["deploy/config.yaml"] = appConfig("2")
	pushed := reg.pushSource(t, ns+"/src", "dev", files)
	start := time.Now()
	token := requestReconcile(t, env)
	g.Eventually(func(g Gomega) {
		cur := &v1alpha1.DevEnvironment{}
		g.Expect(k8s.Get(ctx, key, cur)).To(Succeed())
		g.Expect(cur.Status.LastHandledReconcileAt).To(Equal(token))
		src := cur.Status.Source("app")
		g.Expect(src).NotTo(BeNil())
		g.Expect(src.Digest).To(Equal(pushed.String()))
	}, ackWithin, 50*time.Millisecond).Should(Succeed(), "the new revision is acknowledged while the install waits")
	t.Logf("new revision acknowledged after %s", time.Since(start).Round(time.Millisecond))
	g.Eventually(func() string { return configVersion(t, ns) }, ackWithin, 50*time.Millisecond).Should(Equal("2"),
		"the other component rolls the new revision out")

	// All along the install is pending: the hook has not ended.
	g.Expect(releaseStorageStatus(t, ns, "hooked")).To(Equal("pending-install"))
	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(componentOf(env, "hooked").Phase).To(Equal(v1alpha1.PhaseDeploying))
	})
	expectKstatus(t, env, status.InProgressStatus)

	// The hook completes: the install ends outside any reconcile, and its
	// outcome is taken up.
	endJob(t, hook.Namespace, hook.Name, true)
	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		readyCurrent(g, env)
		g.Expect(componentOf(env, "hooked").Release.Revision).To(Equal(1))
		g.Expect(componentOf(env, "hooked").Release.Status).To(Equal("deployed"))
	})
	expectKstatus(t, env, status.CurrentStatus)
	g.Expect(releaseStorageStatus(t, ns, "hooked")).To(Equal("deployed"))
}

func appConfig(version string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app-config\ndata:\n  version: \"" + version + "\"\n"
}

// configVersion is the version the config component applied ("" before
// it did).
func configVersion(t *testing.T, ns string) string {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "app-config"}, cm); err != nil {
		return ""
	}
	return cm.Data["version"]
}

// releaseStorageStatus is the status Helm's storage records for the
// release's latest revision, read from its Secrets' labels.
func releaseStorageStatus(t *testing.T, ns, name string) string {
	t.Helper()
	var secrets corev1.SecretList
	NewWithT(t).Expect(k8s.List(context.Background(), &secrets, client.InNamespace(ns),
		client.MatchingLabels{"owner": "helm", "name": name})).To(Succeed())
	latest, status := "", ""
	for _, s := range secrets.Items {
		if v := s.Labels["version"]; len(v) > len(latest) || (len(v) == len(latest) && v > latest) {
			latest, status = v, s.Labels["status"]
		}
	}
	return status
}

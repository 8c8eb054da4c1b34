package source_test

import (
	"context"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/builder"
	"github.com/devloop-dev/devloop/test/operatortest"
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
	ns := operatortest.DeployNamespace(t)
	files := operatortest.ChartFiles(t, "installhook", "chart")
	files["deploy/config.yaml"] = appConfig("1")
	operatortest.AppFiles(t, ns, files)
	hooked := builder.Component("hooked", builder.Chart("chart"))
	hooked.Helm.Timeout = &metav1.Duration{Duration: 2 * time.Minute}
	env := operatortest.Env(ns, "acks").ServiceAccount(operatortest.Deployer).AppSource().Components(hooked, builder.Component("config", builder.Manifests("deploy"))).Create(t, operatortest.Admin)
	key := client.ObjectKeyFromObject(env)
	hook := client.ObjectKey{Namespace: ns, Name: "hooked-setup"}
	operatortest.WaitForJob(t, hook.Namespace, hook.Name) // Helm runs the pre-install hook
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(operatortest.PhaseOf(env, "config")).To(Equal(v1alpha1.PhaseReady))
		hooked := env.Status.Component("hooked")
		g.Expect(hooked).NotTo(BeNil())
		g.Expect(hooked.Phase).To(Equal(v1alpha1.PhaseDeploying))
		g.Expect(hooked.Message).To(ContainSubstring("helm install of release " + ns + "/hooked in progress"))
	})
	operatortest.ExpectKstatus(t, env, status.InProgressStatus)
	g.Expect(configVersion(t, ns)).To(Equal("1"))

	// The push: new content, and the reconcile request the plugin writes.
	files["deploy/config.yaml"] = appConfig("2")
	pushed := operatortest.AppFiles(t, ns, files)
	start := time.Now()
	token := operatortest.RequestReconcile(t, env)
	g.Eventually(func(g Gomega) {
		cur := &v1alpha1.DevEnvironment{}
		g.Expect(operatortest.Admin.Get(ctx, key, cur)).To(Succeed())
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
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.Component("hooked").Phase).To(Equal(v1alpha1.PhaseDeploying))
	})
	operatortest.ExpectKstatus(t, env, status.InProgressStatus)

	// The hook completes: the install ends outside any reconcile, and its
	// outcome is taken up.
	operatortest.EndJob(t, hook.Namespace, hook.Name, true)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		g.Expect(env.Status.Component("hooked").Release.Revision).To(Equal(1))
		g.Expect(env.Status.Component("hooked").Release.Status).To(Equal("deployed"))
	})
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)
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
	if err := operatortest.Admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "app-config"}, cm); err != nil {
		return ""
	}
	return cm.Data["version"]
}

// releaseStorageStatus is the status Helm's storage records for the
// release's latest revision, read from its Secrets' labels.
func releaseStorageStatus(t *testing.T, ns, name string) string {
	t.Helper()
	var secrets corev1.SecretList
	NewWithT(t).Expect(operatortest.Admin.List(context.Background(), &secrets, client.InNamespace(ns),
		client.MatchingLabels{"owner": "helm", "name": name})).To(Succeed())
	latest, status := "", ""
	for _, s := range secrets.Items {
		if v := s.Labels["version"]; len(v) > len(latest) || (len(v) == len(latest) && v > latest) {
			latest, status = v, s.Labels["status"]
		}
	}
	return status
}

//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/devcluster"
	. "github.com/devloop-dev/devloop/test/builder"
	. "github.com/devloop-dev/devloop/test/e2e/fixture"
	"github.com/devloop-dev/devloop/test/e2e/poll"
)

// olm is OLM v1's operator-controller and catalogd on the cluster
// (devcluster.InstallOLM). DEVLOOP_E2E_OLM=skip skips the OLM test: its
// first run builds both controllers (minutes, docs/olm-e2e.md).
var olm = &clusterAddon[*devcluster.OLM]{name: "OLM v1", skipVar: "DEVLOOP_E2E_OLM",
	install: func(ctx context.Context, c *devcluster.Cluster) (*devcluster.OLM, error) {
		return c.InstallOLM(ctx, os.Stderr)
	}}

// needOLM is need plus OLM v1 running.
func needOLM(t *testing.T) *devcluster.OLM {
	t.Helper()
	olmInstall, took := olm.need(t)
	t.Logf("OLM v1 operator-controller and catalogd v%s running (%s, %s); installed in %s", olmInstall.Version,
		olmInstall.OperatorControllerImage, olmInstall.CatalogdImage, took.Round(time.Millisecond))
	return olmInstall
}

// olmInstallNamespace is where the ClusterExtension installs devloop: not
// devloop-system, where the suite's chart-installed operator lives.
const olmInstallNamespace = "devloop-olm"

// TestOLMInstallsAndUpgradesDevloop is devloop installed the way OLM users
// install it, by real OLM v1 controllers: its bundle and catalog images on
// the cluster's registry, a ClusterCatalog, the installer ServiceAccount of
// config/olm/installer-rbac.yaml and a ClusterExtension on stable-v0.
//
//  1. The ClusterExtension installs bundle 0.1.0 and the operator runs.
//  2. A small DevEnvironment is Ready under it.
//  3. A catalog with bundle 0.1.1 (the same code under a new image digest)
//     is published: the ClusterExtension upgrades devloop, the operator's
//     pod is replaced, and the environment stays Ready throughout with
//     nothing it deployed recreated.
//
// Two operators must not reconcile the same DevEnvironments: the
// chart-installed operator is uninstalled for the test and comes back
// afterwards (takeOverFromChart); the CRD and every environment stay.
func TestOLMInstallsAndUpgradesDevloop(t *testing.T) {
	c := need(t)
	needOLM(t)
	g := NewWithT(t)
	ctx := context.Background()
	prefix := registry + "/e2e-olm"

	// 0. Two releases of devloop: bundles and catalogs as make bundle,
	// make catalog and make olm-images make them.
	start := time.Now()
	image011, err := c.PushOperatorRelease(ctx, "0.1.1")
	g.Expect(err).NotTo(HaveOccurred())
	bundle010, err := c.PushOLMBundle(ctx, prefix, "0.1.0", operatorImage)
	g.Expect(err).NotTo(HaveOccurred())
	bundle011, err := c.PushOLMBundle(ctx, prefix, "0.1.1", image011)
	g.Expect(err).NotTo(HaveOccurred())
	catalog1, err := c.PushOLMCatalog(ctx, prefix, "latest", []string{bundle010})
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("phase 0: operator image 0.1.1, bundles 0.1.0 and 0.1.1, catalog of 0.1.0 pushed in %s (%s)",
		time.Since(start).Round(time.Millisecond), catalog1)

	start = time.Now()
	takeOverFromChart(t)
	t.Logf("phase 0: chart-installed operator uninstalled, CRD ready for adoption, in %s", time.Since(start).Round(time.Millisecond))

	// 1. Installed by OLM.
	start = time.Now()
	tearDownOLMInstall(t)
	if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: olmInstallNamespace}}); !apierrors.IsAlreadyExists(err) {
		g.Expect(err).NotTo(HaveOccurred())
	}
	rbac, err := c.InstallerRBAC(olmInstallNamespace)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.ApplyOLMObjects(ctx, rbac)).To(Succeed())
	g.Expect(c.ApplyOLMYAML(ctx, clusterCatalog("devloop-e2e", prefix+"/devloop-catalog:latest"))).To(Succeed())
	waitCatalogServing(t, "devloop-e2e", catalog1)
	t.Logf("phase 1: ClusterCatalog serving %s after %s", catalog1, time.Since(start).Round(time.Millisecond))
	g.Expect(c.ApplyOLMYAML(ctx, clusterExtension(olmInstallNamespace, "devloop-e2e"))).To(Succeed())
	waitExtensionInstalled(t, "0.1.0")
	manager := waitOLMOperator(t, operatorImage)
	t.Logf("phase 1: ClusterExtension installed devloop 0.1.0 and its operator runs (%s) %s after the catalog",
		manager, time.Since(start).Round(time.Millisecond))

	// 2. An environment under the OLM-installed operator.
	start = time.Now()
	ns := namespace(t, "e2e-olm")
	env := olmSampleEnvironment(t, ns)
	key := client.ObjectKeyFromObject(env)
	waitEnv(t, key, 3*time.Minute, false, readyNow)
	deployed := deployedUIDs(t, ns)
	t.Logf("phase 2: DevEnvironment Ready %s after it was applied", time.Since(start).Round(time.Millisecond))

	// 3. A newer bundle in the catalog.
	start = time.Now()
	watch := watchStaysReady(t, key)
	catalog2, err := c.PushOLMCatalog(ctx, prefix, "latest", []string{bundle010, bundle011})
	g.Expect(err).NotTo(HaveOccurred())
	waitCatalogServing(t, "devloop-e2e", catalog2)
	t.Logf("phase 3: catalogd unpacked the catalog with 0.1.1 %s after its push (polls every minute)", time.Since(start).Round(time.Millisecond))
	waitExtensionInstalled(t, "0.1.1")
	t.Logf("phase 3: ClusterExtension upgraded to 0.1.1 %s after the push", time.Since(start).Round(time.Millisecond))
	newManager := waitOLMOperator(t, image011)
	g.Expect(newManager).NotTo(Equal(manager), "the upgrade replaces the operator's pod")
	// The new operator reconciles the environment, and leaves it as it was.
	at := requestReconcile(t, env)
	waitEnv(t, key, 2*time.Minute, false, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.LastHandledReconcileAt).To(Equal(at))
		readyNow(g, env)
	})
	// Nothing else reconciled meanwhile: the chart-installed operator is
	// still away (an e2e run started elsewhere would have installed it
	// again with its TestMain).
	err = c.Client.Get(ctx, client.ObjectKey{Namespace: devcluster.OperatorNamespace, Name: devcluster.OperatorDeployment}, &appsv1.Deployment{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the chart-installed operator came back during the test (another e2e run?): %v", err)
	lost := watch()
	g.Expect(lost).To(BeEmpty(), "the DevEnvironment was not Ready during the upgrade")
	g.Expect(deployedUIDs(t, ns)).To(Equal(deployed), "objects the environment deployed were recreated")
	t.Logf("phase 3: upgraded operator %s reconciled the environment, Ready throughout, %s after the push",
		newManager, time.Since(start).Round(time.Millisecond))
}

// takeOverFromChart hands every DevEnvironment to the operator OLM will
// install. Two operators must not reconcile the same environments, and the
// chart's aggregated ClusterRoles have the bundle's names: the
// chart-installed operator is uninstalled. The CRD, which Helm leaves, is
// marked for adoption by the ClusterExtension's release (OLM refuses an
// existing CRD otherwise); deleting it instead would delete the
// environments of make dev-up with it. Those stay, reconciled by the
// OLM-installed operator meanwhile. Afterwards the chart is installed
// again, as TestMain did.
func takeOverFromChart(t *testing.T) {
	t.Helper()
	c := need(t)
	ctx := context.Background()
	g := NewWithT(t)
	t.Cleanup(func() {
		start := time.Now()
		if err := c.InstallOperator(context.Background(), operatorImage); err != nil {
			t.Errorf("installing the chart-installed operator again: %v", err)
			return
		}
		t.Logf("cleanup: chart-installed operator back in %s", time.Since(start).Round(time.Millisecond))
	})
	g.Expect(c.UninstallOperator(ctx)).To(Succeed())
	// What an interrupted run may have left (its cleanup never ran): the
	// ClusterExtension, its install namespace, OLM's release records.
	g.Expect(c.HandBackFromOLM(ctx, "devloop", olmInstallNamespace, devcluster.DevEnvironmentCRD)).To(Succeed())
	g.Expect(c.AdoptCRD(ctx, devcluster.DevEnvironmentCRD, "devloop", olmInstallNamespace)).To(Succeed())
}

// tearDownOLMInstall registers the removal of what the test installs with
// OLM: the test's environments first, while the OLM-installed operator
// still runs to finalize them, then the ClusterExtension and what it
// installed but the CRD (devcluster.HandBackFromOLM), the ClusterCatalog
// and the installer's cluster-wide RBAC.
func tearDownOLMInstall(t *testing.T) {
	t.Helper()
	c := need(t)
	t.Cleanup(func() {
		ctx := context.Background()
		start := time.Now()
		mine := func() []v1alpha1.DevEnvironment {
			list := &v1alpha1.DevEnvironmentList{}
			if err := c.Client.List(ctx, list); err != nil {
				return nil
			}
			var out []v1alpha1.DevEnvironment
			for _, e := range list.Items {
				if strings.HasPrefix(e.Namespace, "e2e-olm-") {
					out = append(out, e)
				}
			}
			return out
		}
		for _, e := range mine() {
			_ = c.Client.Delete(ctx, &e)
		}
		finalized := poll.Wait{What: "the test's DevEnvironments finalized by the OLM-installed operator", Every: 300 * time.Millisecond, Within: 2 * time.Minute}
		if _, err := finalized.Until(ctx, func(context.Context) (string, bool, error) {
			left := mine()
			return fmt.Sprintf("%d left", len(left)), len(left) == 0, nil
		}); err != nil {
			t.Error(err)
		}
		if err := c.HandBackFromOLM(ctx, "devloop", olmInstallNamespace, devcluster.DevEnvironmentCRD); err != nil {
			t.Errorf("uninstalling the OLM-installed devloop: %v", err)
		}
		_ = c.Client.Delete(ctx, olmObject(clusterCatalogGVK, "devloop-e2e"))
		if rbac, err := c.InstallerRBAC(olmInstallNamespace); err == nil {
			for _, o := range rbac {
				if o.GetNamespace() == "" {
					_ = c.Client.Delete(ctx, o)
				}
			}
		}
		t.Logf("cleanup: the test's environment, the OLM-installed devloop (but its CRD), ClusterCatalog and installer RBAC removed in %s",
			time.Since(start).Round(time.Millisecond))
	})
}

// waitCatalogServing waits until catalogd serves the catalog image of
// digest (repository@digest).
func waitCatalogServing(t *testing.T, name, ref string) {
	t.Helper()
	_, digest, _ := strings.Cut(ref, "@")
	last := ""
	waitCheck(t, poll.Wait{What: "ClusterCatalog " + name + " serving " + digest, Every: 500 * time.Millisecond, Within: 4 * time.Minute}, func(g Gomega) {
		st, err := getOLMStatus(context.Background(), clusterCatalogGVK, name)
		g.Expect(err).NotTo(HaveOccurred())
		if s := st.summary(); s != last {
			t.Logf("  ClusterCatalog %s: %s (unpacked %s)", name, s, st.resolvedDigest())
			last = s
		}
		g.Expect(st.resolvedDigest()).To(Equal(digest))
		g.Expect(st.isTrue("Serving")).To(BeTrue())
	})
}

// waitExtensionInstalled waits until the ClusterExtension reports bundle
// version installed and its desired state reached: Progressing with reason
// Succeeded, not Retrying (as it stays when OLM cannot watch what it
// installed).
func waitExtensionInstalled(t *testing.T, version string) {
	t.Helper()
	waitExtension(t, "devloop", version)
}

// waitExtension is waitExtensionInstalled for the ClusterExtension name.
func waitExtension(t *testing.T, name, version string) {
	t.Helper()
	last := ""
	waitCheck(t, poll.Wait{What: "ClusterExtension " + name + " installed " + version, Every: 500 * time.Millisecond, Within: 5 * time.Minute}, func(g Gomega) {
		st, err := getOLMStatus(context.Background(), clusterExtensionGVK, name)
		g.Expect(err).NotTo(HaveOccurred())
		if s := st.summary(); s != last {
			t.Logf("  ClusterExtension %s: %s", name, s)
			last = s
		}
		g.Expect(st.installedVersion()).To(Equal(version))
		g.Expect(st.isTrue("Installed")).To(BeTrue())
		progressing := meta.FindStatusCondition(st.Conditions, "Progressing")
		g.Expect(progressing).NotTo(BeNil())
		g.Expect(progressing.Reason).To(Equal("Succeeded"), "Progressing: %s", progressing.Message)
	})
}

// waitOLMOperator waits until the operator OLM installed has rolled out
// with image, and returns the name of its one Ready pod.
func waitOLMOperator(t *testing.T, image string) string {
	t.Helper()
	c := need(t)
	var pod string
	waitCheck(t, poll.Wait{What: "the OLM-installed operator rolled out with " + image, Every: 500 * time.Millisecond, Within: 3 * time.Minute}, func(g Gomega) {
		d := &appsv1.Deployment{}
		g.Expect(c.Client.Get(context.Background(), client.ObjectKey{Namespace: olmInstallNamespace, Name: devcluster.OperatorDeployment}, d)).To(Succeed())
		g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal(image))
		g.Expect(d.Status.ObservedGeneration).To(Equal(d.Generation))
		g.Expect(d.Status.UpdatedReplicas).To(Equal(d.Status.Replicas), "rolling out")
		g.Expect(d.Status.AvailableReplicas).To(BeNumerically(">=", 1))
		pods := readyPods(g, olmInstallNamespace, d.Spec.Selector.MatchLabels)
		g.Expect(pods).To(HaveLen(1))
		g.Expect(pods[0].Spec.Containers[0].Image).To(Equal(image))
		pod = pods[0].Name
	})
	return pod
}

// olmSampleEnvironment pushes a small source (a ConfigMap and a Deployment
// of busybox) and applies a DevEnvironment deploying it.
func olmSampleEnvironment(t *testing.T, ns string) *v1alpha1.DevEnvironment {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	env := newEnv(ns, "hello").Components(
		Component("settings", Manifests("settings")),
		Component("web", DependsOn("settings"), Manifests("web"))).Build()
	pushDir(t, env, sourceDir(t, Files{
		"settings/configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {greeting: hello}\n",
		"web/deployment.yaml":     Deployment("web", "web", "image: "+busybox, idleCommand),
	}))
	g.Expect(need(t).ApplyEnvironment(ctx, env)).To(Succeed())
	return env
}

// deployedUIDs identifies what the environment deployed: the ConfigMap,
// the Deployment (with its generation: a re-applied template would bump
// it) and its pods. A recreated or rolled object changes the map.
func deployedUIDs(t *testing.T, ns string) map[string]string {
	t.Helper()
	c := need(t)
	ctx := context.Background()
	g := NewWithT(t)
	cm := &corev1.ConfigMap{}
	g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "settings"}, cm)).To(Succeed())
	d := &appsv1.Deployment{}
	g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, d)).To(Succeed())
	out := map[string]string{
		"configmap/settings": string(cm.UID),
		"deployment/web":     fmt.Sprintf("%s generation %d", d.UID, d.Generation),
	}
	pods := &corev1.PodList{}
	g.Expect(c.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app": "web"})).To(Succeed())
	for _, p := range pods.Items {
		out["pod/"+p.Name] = string(p.UID)
	}
	return out
}

// watchStaysReady polls the environment every 200 ms until the returned
// function is called, which stops it and returns every moment it was seen
// not Ready (or not found), as messages.
func watchStaysReady(t *testing.T, key client.ObjectKey) func() []string {
	t.Helper()
	c := need(t)
	stop := make(chan struct{})
	done := make(chan []string)
	go func() {
		var lost []string
		for {
			env := &v1alpha1.DevEnvironment{}
			err := c.Client.Get(context.Background(), key, env)
			switch {
			case err != nil:
				lost = append(lost, fmt.Sprintf("%s: %v", time.Now().Format(time.TimeOnly), err))
			case !meta.IsStatusConditionTrue(env.Status.Conditions, v1alpha1.ConditionReady):
				lost = append(lost, time.Now().Format(time.TimeOnly)+": "+devcluster.Summary(env))
			}
			select {
			case <-stop:
				done <- lost
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return func() []string {
		close(stop)
		return <-done
	}
}

package controllers

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/deploy"
	"github.com/devloop-dev/devloop/internal/testenv"
)

// deployer makes a ServiceAccount in ns; with admin, it may do anything
// in ns, as a tenant's deployer would (testenv.CreateDeployer).
func deployer(t testing.TB, ns, name string, admin bool) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	if admin {
		g.Expect(testenv.CreateDeployer(ctx, k8s, ns, name)).To(Succeed())
		return
	}
	g.Expect(k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})).To(Succeed())
}

// webDeployment is a manifest of a Deployment running the built image by
// its bare name.
const webDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: web:latest
`

// markAvailable writes the status a Deployment controller would once its
// pods are up (envtest runs no controllers).
func markAvailable(t testing.TB, ns, name string) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		d := &appsv1.Deployment{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
			return err
		}
		n := ptr.Deref(d.Spec.Replicas, 1)
		d.Status = appsv1.DeploymentStatus{
			ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n,
			Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
			},
		}
		return k8s.Status().Update(context.Background(), d)
	}, timeout).Should(Succeed())
}

func componentOf(env *v1alpha1.DevEnvironment, name string) *v1alpha1.ComponentStatus {
	return env.Status.Component(name)
}

func expectGone(t *testing.T, obj client.Object) {
	t.Helper()
	NewWithT(t).Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj))
	}, timeout).Should(BeTrue(), "%T %s still there", obj, obj.GetName())
}

func TestManifestsDeployPinnedImageUntilAvailable(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	useDeployEngine(ns)
	deployer(t, ns, "deployer", true)
	files := webSource("binary")
	files["deploy/deployment.yaml"] = webDeployment
	files["deploy/config.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra}\ndata: {a: b}\n"
	reg.pushSource(t, ns+"/src", "dev", files)
	env := webEnv(ns)
	env.Spec.ServiceAccountName = "deployer"
	env.Spec.Registry.PullPrefix = "localhost:5001/" + ns
	env.Spec.Components[0].Manifests.Paths = []string{"deploy"}
	g.Expect(k8s.Create(ctx, env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)

	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		c := componentOf(env, "web")
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Phase).To(Equal(v1alpha1.PhaseDeploying), "message: %s", c.Message)
		g.Expect(c.Message).To(ContainSubstring("deployments.apps/web"))
		g.Expect(condition(env, v1alpha1.ConditionReconciling)).NotTo(BeNil())
	})
	img := imageOf(env, "web", "web")
	d := &appsv1.Deployment{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, d)).To(Succeed())
	g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal("localhost:5001/" + ns + "/web@" + img.Digest))
	g.Expect(d.Labels).To(HaveKeyWithValue(deploy.LabelEnvironment, "web"))
	g.Expect(d.Labels).To(HaveKeyWithValue(deploy.LabelComponent, "web"))
	g.Expect(componentOf(env, "web").Inventory).To(ConsistOf(
		v1alpha1.ObjectRef{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: ns, Name: "web"},
		v1alpha1.ObjectRef{Version: "v1", Kind: "ConfigMap", Namespace: ns, Name: "extra"},
	))
	expectKstatus(t, env, status.InProgressStatus)

	markAvailable(t, ns, "web")
	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		readyCurrent(g, env)
		g.Expect(componentOf(env, "web").Phase).To(Equal(v1alpha1.PhaseReady))
	})
	expectKstatus(t, env, status.CurrentStatus)

	// An object leaving the set is pruned.
	delete(files, "deploy/config.yaml")
	reg.pushSource(t, ns+"/src", "dev", files)
	_ = requestReconcile(t, env)
	expectGone(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "extra"}})
	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(componentOf(env, "web").Inventory).To(HaveLen(1))
	})
	markAvailable(t, ns, "web") // the new source may have built a new digest
	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		readyCurrent(g, env)
		g.Expect(componentOf(env, "web").Inventory).To(HaveLen(1))
	})

	// Deleting the environment prunes what it applied.
	g.Expect(k8s.Delete(ctx, env)).To(Succeed())
	expectGone(t, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}})
	expectGone(t, &v1alpha1.DevEnvironment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}})
	// The last state before deletion was Current.
	expectKstatus(t, env, status.CurrentStatus)
}

// chartFiles reads a test chart into source files under prefix.
func chartFiles(t testing.TB, name, prefix string) map[string]string {
	t.Helper()
	return chartFilesFrom(t, filepath.Join("testdata", "charts", name), prefix)
}

func TestHelmReleaseWithImageValuesThenUninstall(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	useDeployEngine(ns)
	deployer(t, ns, "deployer", true)
	files := webSource("binary")
	for k, v := range chartFiles(t, "web", "chart") {
		files[k] = v
	}
	srcDigest := reg.pushSource(t, ns+"/src", "dev", files)
	env := webEnv(ns)
	env.Spec.ServiceAccountName = "deployer"
	c := &env.Spec.Components[0]
	c.Manifests = nil
	c.Helm = &v1alpha1.HelmSpec{
		Chart:       v1alpha1.ChartRef{Source: "app", Path: "chart"},
		ReleaseName: "site",
		ImageValues: []v1alpha1.ImageValue{{Image: "web", Path: "version", From: "Revision"}},
	}
	g.Expect(k8s.Create(ctx, env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)

	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		c := componentOf(env, "web")
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Phase).To(Equal(v1alpha1.PhaseDeploying), "message: %s", c.Message)
		g.Expect(c.Release).NotTo(BeNil())
		g.Expect(c.Release.Revision).To(BeNumerically(">", 0), "installed, not only about to be")
	})
	g.Expect(*componentOf(env, "web").Release).To(Equal(v1alpha1.ReleaseStatus{Name: "site", Namespace: ns, Revision: 1, Status: "deployed",
		Workloads: []v1alpha1.ObjectRef{{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: ns, Name: "site"}}}), "the release's workloads, for kubectl devloop logs")
	img := imageOf(env, "web", "web")
	cm := &corev1.ConfigMap{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "site-version"}, cm)).To(Succeed())
	g.Expect(cm.Data["version"]).To(Equal("rev-" + srcDigest.Hex[:12]))
	d := &appsv1.Deployment{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "site"}, d)).To(Succeed())
	g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal(reg.host + "/" + ns + "/web@" + img.Digest))
	expectKstatus(t, env, status.InProgressStatus)

	markAvailable(t, ns, "site")
	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		readyCurrent(g, env)
	})
	// Nothing changed: the release is not upgraded again.
	g.Expect(componentOf(env, "web").Release.Revision).To(Equal(1))
	g.Expect(componentOf(env, "web").Drift).To(BeEmpty())
	expectKstatus(t, env, status.CurrentStatus)
	// The release's objects carry the environment's labels, as applied
	// manifests do.
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "site"}, d)).To(Succeed())
	g.Expect(d.Labels).To(HaveKeyWithValue(deploy.LabelEnvironment, "web"))

	// A hand edit of an object of the release is shown and put back
	// without a new revision (Helm itself would see nothing to upgrade).
	cm.Data["version"] = "edited"
	g.Expect(k8s.Update(ctx, cm)).To(Succeed())
	handled := requestReconcile(t, env)
	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.LastHandledReconcileAt).To(Equal(handled))
	})
	g.Expect(componentOf(env, "web").Drift).To(Equal([]string{"configmaps/site-version: data.version changed by hand"}))
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "site-version"}, cm)).To(Succeed())
	g.Expect(cm.Data["version"]).To(Equal("rev-" + srcDigest.Hex[:12]))
	g.Expect(componentOf(env, "web").Release.Revision).To(Equal(1))
	expectDriftEvent(t, ns, "configmaps/site-version: data.version changed by hand")
	readyCurrent(g, env)
	expectKstatus(t, env, status.CurrentStatus)

	g.Expect(k8s.Delete(ctx, env)).To(Succeed())
	expectGone(t, &v1alpha1.DevEnvironment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}})
	expectGone(t, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "site"}})
	expectGone(t, cm)
	secrets := &corev1.SecretList{}
	g.Expect(k8s.List(ctx, secrets, client.InNamespace(ns), client.MatchingLabels{"owner": "helm", "name": "site"})).To(Succeed())
	g.Expect(secrets.Items).To(BeEmpty(), "release storage left after uninstall")
	// The last state before deletion was Current.
	expectKstatus(t, env, status.CurrentStatus)
}

func TestDeployWithoutRightsStallsNamingVerbAndResource(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	useDeployEngine(ns)
	deployer(t, ns, "nobody", false)
	reg.pushSource(t, ns+"/src", "dev", map[string]string{
		"deploy/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {a: b}\n"})
	env := &v1alpha1.DevEnvironment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "denied"},
		Spec: v1alpha1.DevEnvironmentSpec{
			ServiceAccountName: "nobody",
			Sources: []v1alpha1.Source{{Name: "app", OCI: &v1alpha1.OCISource{
				Repository: reg.host + "/" + ns + "/src", Tag: "dev", Insecure: true}}},
			Components: []v1alpha1.Component{{Name: "config",
				Manifests: &v1alpha1.ManifestsSpec{Source: "app", Paths: []string{"deploy"}}}},
		},
	}
	g.Expect(k8s.Create(ctx, env)).To(Succeed())

	env = eventually(t, client.ObjectKeyFromObject(env), func(g Gomega, env *v1alpha1.DevEnvironment) {
		stalled := condition(env, v1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Reason).To(Equal(v1alpha1.ReasonDeployFailed))
		g.Expect(stalled.Message).To(ContainSubstring("cannot patch configmaps in namespace " + ns))
		g.Expect(stalled.Message).To(ContainSubstring("system:serviceaccount:" + ns + ":nobody"))
		g.Expect(env.Status.ObservedGeneration).To(Equal(env.Generation))
	})
	g.Expect(componentOf(env, "config").Phase).To(Equal(v1alpha1.PhaseFailed))
	expectKstatus(t, env, status.FailedStatus)
}

func TestDeployWithoutServiceAccountStalls(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	useDeployEngine(ns)
	reg.pushSource(t, ns+"/src", "dev", map[string]string{"deploy/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\n"})
	env := &v1alpha1.DevEnvironment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "anonymous"},
		Spec: v1alpha1.DevEnvironmentSpec{
			Sources: []v1alpha1.Source{{Name: "app", OCI: &v1alpha1.OCISource{
				Repository: reg.host + "/" + ns + "/src", Tag: "dev", Insecure: true}}},
			Components: []v1alpha1.Component{{Name: "config",
				Manifests: &v1alpha1.ManifestsSpec{Source: "app", Paths: []string{"deploy"}}}},
		},
	}
	g.Expect(k8s.Create(context.Background(), env)).To(Succeed())
	env = eventually(t, client.ObjectKeyFromObject(env), func(g Gomega, env *v1alpha1.DevEnvironment) {
		stalled := condition(env, v1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Reason).To(Equal(v1alpha1.ReasonNoServiceAccount))
		g.Expect(stalled.Message).To(ContainSubstring("spec.serviceAccountName: no ServiceAccount to deploy as"))
	})
	expectKstatus(t, env, status.FailedStatus)

	// Nothing was deployed, so nothing wedges the deletion.
	g.Expect(k8s.Delete(context.Background(), env.DeepCopy())).To(Succeed())
	expectGone(t, &v1alpha1.DevEnvironment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "anonymous"}})
}

func TestDroppedComponentIsPruned(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	useDeployEngine(ns)
	deployer(t, ns, "deployer", true)
	reg.pushSource(t, ns+"/src", "dev", map[string]string{
		"a/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
		"b/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n",
	})
	env := &v1alpha1.DevEnvironment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pair"},
		Spec: v1alpha1.DevEnvironmentSpec{
			ServiceAccountName: "deployer",
			Sources: []v1alpha1.Source{{Name: "app", OCI: &v1alpha1.OCISource{
				Repository: reg.host + "/" + ns + "/src", Tag: "dev", Insecure: true}}},
			Components: []v1alpha1.Component{
				{Name: "a", Manifests: &v1alpha1.ManifestsSpec{Source: "app", Paths: []string{"a"}}},
				{Name: "b", DependsOn: []string{"a"}, Manifests: &v1alpha1.ManifestsSpec{Source: "app", Paths: []string{"b"}}},
			},
		},
	}
	g.Expect(k8s.Create(ctx, env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)
	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		readyCurrent(g, env)
		g.Expect(env.Status.ComponentsReady).To(Equal("2/2"))
	})
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "b"}, &corev1.ConfigMap{})).To(Succeed())

	patch := client.MergeFrom(env.DeepCopy())
	env.Spec.Components = env.Spec.Components[:1]
	g.Expect(k8s.Patch(ctx, env, patch)).To(Succeed())
	expectGone(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b"}})
	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		readyCurrent(g, env)
		g.Expect(env.Status.Components).To(HaveLen(1))
	})
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "a"}, &corev1.ConfigMap{})).To(Succeed())
	expectKstatus(t, env, status.CurrentStatus)
}

func TestFailingReleaseStallsWithHelmError(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	useDeployEngine(ns)
	deployer(t, ns, "deployer", true)
	reg.pushSource(t, ns+"/src", "dev", chartFiles(t, "web", "chart"))
	env := &v1alpha1.DevEnvironment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "broken"},
		Spec: v1alpha1.DevEnvironmentSpec{
			ServiceAccountName: "deployer",
			Sources: []v1alpha1.Source{{Name: "app", OCI: &v1alpha1.OCISource{
				Repository: reg.host + "/" + ns + "/src", Tag: "dev", Insecure: true}}},
			Components: []v1alpha1.Component{{Name: "site", Helm: &v1alpha1.HelmSpec{
				Chart:  v1alpha1.ChartRef{Source: "app", Path: "chart"},
				Values: &apiextensionsv1.JSON{Raw: []byte(`{"broken": true}`)},
			}}},
		},
	}
	g.Expect(k8s.Create(ctx, env)).To(Succeed())
	env = eventually(t, client.ObjectKeyFromObject(env), func(g Gomega, env *v1alpha1.DevEnvironment) {
		stalled := condition(env, v1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Reason).To(Equal(v1alpha1.ReasonDeployFailed))
		g.Expect(stalled.Message).To(ContainSubstring("failed 3 times in a row"))
		g.Expect(stalled.Message).To(ContainSubstring("Not_A_Valid_Name"))
	})
	g.Expect(componentOf(env, "site").Phase).To(Equal(v1alpha1.PhaseFailed))
	// The count lives in status, so a restarted operator (the engine keeps
	// no state of its own) stalls it again rather than retrying from zero.
	rel := componentOf(env, "site").Release
	g.Expect(rel).NotTo(BeNil())
	g.Expect(rel.Failures).To(Equal(3))
	g.Expect(rel.FailedDigest).To(HavePrefix("sha256:"))
	expectKstatus(t, env, status.FailedStatus)

	// Any later reconcile (here, an unrelated annotation) leaves the
	// stalled release alone: the same chart and values would fail again.
	key := client.ObjectKeyFromObject(env)
	patch := client.MergeFrom(env.DeepCopy())
	env.Annotations = map[string]string{"example.com/note": "looked at"}
	g.Expect(k8s.Patch(ctx, env, patch)).To(Succeed())
	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		stalled := condition(env, v1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Message).To(ContainSubstring("not retried until the chart, values or images change"))
		g.Expect(stalled.Message).To(ContainSubstring("Not_A_Valid_Name"), "the cause stays")
		g.Expect(componentOf(env, "site").Release.Failures).To(Equal(3), "the count matches what the docs say")
	})
	// A reconcile request allows one more attempt, which fails again.
	_ = requestReconcile(t, env)
	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.LastHandledReconcileAt).To(Equal(env.Annotations[v1alpha1.ReconcileRequestAnnotation]))
		stalled := condition(env, v1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Message).To(ContainSubstring("failed 3 times in a row"))
		g.Expect(stalled.Message).NotTo(ContainSubstring("not retried"), "it was tried")
		g.Expect(componentOf(env, "site").Release.Failures).To(Equal(3))
	})
	expectKstatus(t, env, status.FailedStatus)
}

func TestHandEditsAreShownAndCorrected(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	useDeployEngine(ns)
	deployer(t, ns, "deployer", true)
	files := webSource("binary")
	files["deploy/deployment.yaml"] = webDeployment
	files["deploy/config.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {mode: declared}\n"
	reg.pushSource(t, ns+"/src", "dev", files)
	env := webEnv(ns)
	env.Spec.ServiceAccountName = "deployer"
	env.Spec.Components[0].Manifests.Paths = []string{"deploy"}
	g.Expect(k8s.Create(ctx, env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)
	eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(componentOf(env, "web")).NotTo(BeNil())
		g.Expect(componentOf(env, "web").Inventory).To(HaveLen(2))
	})
	markAvailable(t, ns, "web")
	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		readyCurrent(g, env)
		g.Expect(componentOf(env, "web").AppliedDigest).NotTo(BeEmpty())
	})
	// A reconcile with nothing edited finds no drift.
	handled := requestReconcile(t, env)
	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.LastHandledReconcileAt).To(Equal(handled))
		readyCurrent(g, env)
	})
	g.Expect(componentOf(env, "web").Drift).To(BeEmpty())

	// A hand edit of a value of the ConfigMap is shown and put back; the
	// environment stays Ready, so status keeps it until the next look.
	cm := &corev1.ConfigMap{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "settings"}, cm)).To(Succeed())
	cm.Data["mode"] = "edited"
	g.Expect(k8s.Update(ctx, cm)).To(Succeed())
	handled = requestReconcile(t, env)
	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.LastHandledReconcileAt).To(Equal(handled))
	})
	g.Expect(componentOf(env, "web").Drift).To(Equal([]string{"configmaps/settings: data.mode changed by hand"}))
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "settings"}, cm)).To(Succeed())
	g.Expect(cm.Data).To(HaveKeyWithValue("mode", "declared"))
	readyCurrent(g, env)
	expectDriftEvent(t, ns, "configmaps/settings: data.mode changed by hand")

	// Scaling the Deployment by hand is undone; the event names it (the
	// status line lasts only until the rollout's next look).
	d := &appsv1.Deployment{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, d)).To(Succeed())
	d.Spec.Replicas = ptr.To(int32(3))
	g.Expect(k8s.Update(ctx, d)).To(Succeed())
	_ = requestReconcile(t, env)
	expectDriftEvent(t, ns, "deployments.apps/web: spec.replicas changed by hand")
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, d)).To(Succeed())
	g.Expect(*d.Spec.Replicas).To(Equal(int32(1)))

	// Once rolled out again, the next look finds nothing to correct.
	markAvailable(t, ns, "web")
	handled = requestReconcile(t, env)
	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.LastHandledReconcileAt).To(Equal(handled))
		readyCurrent(g, env)
		g.Expect(componentOf(env, "web").Drift).To(BeEmpty())
	})
	expectKstatus(t, env, status.CurrentStatus)
}

// expectDriftEvent waits for a DriftCorrected Warning event in ns whose
// note contains line.
func expectDriftEvent(t *testing.T, ns, line string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		events := &eventsv1.EventList{}
		g.Expect(k8s.List(context.Background(), events, client.InNamespace(ns))).To(Succeed())
		var notes []string
		for _, e := range events.Items {
			if e.Reason == v1alpha1.ReasonDriftCorrected && e.Type == corev1.EventTypeWarning {
				notes = append(notes, e.Note)
			}
		}
		g.Expect(notes).To(ContainElement(ContainSubstring(line)))
	}, timeout).Should(Succeed())
}

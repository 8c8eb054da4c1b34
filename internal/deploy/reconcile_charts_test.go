package deploy_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/registry"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/builder"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// pushChart packages a test chart and pushes it to the test registry as an
// OCI chart, as `helm push` does; it returns the oci:// repository.
func pushChart(t *testing.T, name, repo string) string {
	t.Helper()
	g := NewWithT(t)
	ch, err := loader.Load(filepath.Join("testdata", "charts", name))
	g.Expect(err).NotTo(HaveOccurred())
	file, err := chartutil.Save(ch, t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	data, err := os.ReadFile(file)
	g.Expect(err).NotTo(HaveOccurred())
	rc, err := registry.NewClient(registry.ClientOptPlainHTTP(),
		registry.ClientOptCredentialsFile(filepath.Join(t.TempDir(), "creds.json")))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = rc.Push(data, operatortest.Registry.Host+"/"+repo+"/"+name+":"+ch.Metadata.Version)
	g.Expect(err).NotTo(HaveOccurred())
	return "oci://" + operatortest.Registry.Host + "/" + repo + "/" + name
}

// setValues writes the values.yaml key of a ConfigMap, creating it.
func setValues(t *testing.T, ns, name, values string) {
	t.Helper()
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	err := operatortest.Admin.Get(ctx, client.ObjectKeyFromObject(cm), cm)
	cm.Data = map[string]string{"values.yaml": values}
	if err != nil {
		err = operatortest.Admin.Create(ctx, cm)
	} else {
		err = operatortest.Admin.Update(ctx, cm)
	}
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
}

// TestOCIChartWithCRDAndCustomResource is USE-CASES.md #1 through the
// reconciler: a chart from an OCI registry ships a CRD, a Deployment of the
// built image and a custom resource whose version field is the image's
// revision tag. Values are layered chart < values < valuesFrom (ConfigMap,
// then Secret) < imageValues. A failed upgrade rolls back to the last good
// release, and fixing the values heals it.
func TestOCIChartWithCRDAndCustomResource(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := operatortest.DeployNamespace(t)
	operatortest.AllowCRDs(t, ns, "deployer")
	_, srcDigest := pushWebSource(t, ns)
	chartRepo := pushChart(t, "demo", ns+"/charts")
	setValues(t, ns, "dev-values", "replicas: 2\nvalidator: {version: from-configmap}\n")
	g.Expect(operatortest.Admin.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dev-secret"},
		StringData: map[string]string{"values.yaml": "validator: {version: from-secret}\n"},
	})).To(Succeed())

	key := operatortest.CreateEnv(t, webHelmEnv(ns, &v1alpha1.HelmSpec{
		Chart:       v1alpha1.ChartRef{OCI: chartRepo, Version: "0.1.x"},
		ReleaseName: "gpu",
		Values:      &apiextensionsv1.JSON{Raw: []byte(`{"replicas": 3, "image": "web:dev"}`)},
		ValuesFrom: []v1alpha1.ValuesReference{
			{Kind: "ConfigMap", Name: "dev-values"},
			{Kind: "Secret", Name: "dev-secret"},
		},
		ImageValues: []v1alpha1.ImageValue{{Image: "web", Path: "validator.version", From: "Revision"}},
	}))

	env := waitForWebDeploying(t, key, expectInstalled)
	operatortest.ExpectKstatus(t, env, status.InProgressStatus)

	// The CRD is installed and established before the custom resource.
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Name: "validators.demo.devloop.dev"}, crd)).To(Succeed())
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	g.Expect(conds).To(ContainElement(HaveKeyWithValue("type", "Established")))
	// The custom resource carries the revision tag the build pushed: the
	// imageValues entry wins over the ConfigMap and the Secret.
	cr := &unstructured.Unstructured{}
	cr.SetGroupVersionKind(schema.GroupVersionKind{Group: "demo.devloop.dev", Version: "v1", Kind: "Validator"})
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "gpu-validator"}, cr)).To(Succeed())
	version, _, _ := unstructured.NestedString(cr.Object, "spec", "version")
	g.Expect(version).To(Equal("rev-" + srcDigest.Hex[:12]))
	img := env.Status.Component("web").Image("web")
	g.Expect(img.Tags).To(ContainElement(version), "the tag in the custom resource was pushed")
	// The Deployment runs the digest-pinned image; replicas come from the
	// ConfigMap, over the spec's values.
	d := &appsv1.Deployment{}
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "gpu-app"}, d)).To(Succeed())
	g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal(operatortest.Registry.Host + "/" + ns + "/web@" + img.Digest))
	g.Expect(*d.Spec.Replicas).To(Equal(int32(2)))

	env = rolledOut(t, key, "gpu-app")
	g.Expect(env.Status.Component("web").Release.Revision).To(Equal(1))
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)

	// A values change that breaks the release: every upgrade fails and is
	// rolled back, so the last good objects stay and the release is
	// "deployed" again; after three attempts the environment stalls with
	// Helm's error.
	setValues(t, ns, "dev-values", "replicas: 2\nbroken: true\n")
	_ = operatortest.RequestReconcile(t, env)
	env = operatortest.WaitForStalled(t, key, v1alpha1.ReasonDeployFailed, "Not_A_Valid_Name")
	operatortest.ExpectKstatus(t, env, status.FailedStatus)
	rel := env.Status.Component("web").Release
	g.Expect(rel.Revision).To(BeNumerically(">", 2), "failed upgrades and their rollbacks are revisions")
	g.Expect(rel.Status).To(Equal("deployed"), "the failed upgrade was rolled back")
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "gpu-app"}, d)).To(Succeed())
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "gpu-validator"}, cr)).To(Succeed())

	// Fixing the values heals it on the next reconcile.
	setValues(t, ns, "dev-values", "replicas: 1\n")
	_ = operatortest.RequestReconcile(t, env)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(operatortest.EnvCondition(env, v1alpha1.ConditionStalled)).To(BeNil())
		g.Expect(env.Status.Component("web").Release.Revision).To(BeNumerically(">", rel.Revision))
	})
	env = rolledOut(t, key, "gpu-app")
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "gpu-app"}, d)).To(Succeed())
	g.Expect(*d.Spec.Replicas).To(Equal(int32(1)))
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)
}

// TestFailingHookStallsThenInstalls: a pre-install hook the API server
// refuses fails the install, which is uninstalled before each retry, so no
// failed release is left; a values fix installs it.
func TestFailingHookStallsThenInstalls(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := operatortest.DeployNamespace(t)
	files := map[string]string{}
	for k, v := range operatortest.DirFiles(t, filepath.Join("testdata", "charts", "hookfail"), "chart") {
		files[k] = v
	}
	operatortest.AppFiles(t, ns, files)
	env := operatortest.Env(ns, "hooks").ServiceAccount(operatortest.Deployer).AppSource().Components(builder.Component("init", builder.Chart("chart"))).Create(t, operatortest.Admin)
	key := client.ObjectKeyFromObject(env)
	env = operatortest.WaitForStalled(t, key, v1alpha1.ReasonDeployFailed, "pre-install", "Invalid_Hook_Name")
	g.Expect(env.Status.Component("init").Phase).To(Equal(v1alpha1.PhaseFailed))
	operatortest.ExpectKstatus(t, env, status.FailedStatus)
	// The release's own objects were never left behind by a failed install.
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "init-config"}, &corev1.ConfigMap{})).NotTo(Succeed())

	operatortest.EditSpec(t, key, func(cur *v1alpha1.DevEnvironment) {
		cur.Spec.Components[0].Helm.Values = &apiextensionsv1.JSON{Raw: []byte(`{"failHook": false}`)}
	})
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		g.Expect(env.Status.Component("init").Release).NotTo(BeNil())
		g.Expect(env.Status.Component("init").Release.Status).To(Equal("deployed"))
	})
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "init-config"}, &corev1.ConfigMap{})).To(Succeed())
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "init-hook"}, &corev1.ConfigMap{})).To(Succeed())
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)
}

// TestKustomizeComponent deploys a kustomize overlay: its patch and labels
// are applied, and the image it names is pinned to the built digest.
func TestKustomizeComponent(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := operatortest.DeployNamespace(t)
	pushWebSource(t, ns, operatortest.DirFiles(t, filepath.Join("testdata", "manifests", "kustomize"), "config"))
	env := webManifestsEnv(ns, "config/overlay")
	env.Spec.Registry.PullPrefix = "localhost:5001/team"
	env.Spec.Components[0].Images[0].Name = "api"
	key := operatortest.CreateEnv(t, env)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.Component("web")).NotTo(BeNil())
		g.Expect(env.Status.Component("web").Inventory).To(HaveLen(1))
	})
	d := &appsv1.Deployment{}
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "api"}, d)).To(Succeed())
	g.Expect(*d.Spec.Replicas).To(Equal(int32(3)), "the overlay's patch")
	g.Expect(d.Labels).To(HaveKeyWithValue("tier", "backend"), "the overlay's labels")
	img := env.Status.Component("web").Image("api")
	g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal("localhost:5001/team/api@"+img.Digest),
		"the overlay names the image by its pull repository; it is pinned to the built digest")
	operatortest.ExpectKstatus(t, env, status.InProgressStatus)
	env = rolledOut(t, key, "api")
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)
}

// deployedIntoTarget makes an environment in a namespace of its own whose
// manifests component and Helm release deploy into a second namespace,
// target, and brings it to Ready.
func deployedIntoTarget(t *testing.T, name string) (env *v1alpha1.DevEnvironment, target *corev1.Namespace) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	ns := operatortest.DeployNamespace(t)
	target = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "target-"}}
	g.Expect(operatortest.Admin.Create(ctx, target)).To(Succeed())
	bindDeployer(t, target.Name, ns, "deployer")

	files := operatortest.DirFiles(t, filepath.Join("testdata", "charts", "hookfail"), "chart")
	files["deploy/config.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: plain}\ndata: {a: b}\n"
	operatortest.AppFiles(t, ns, files)
	plain := builder.Component("plain", builder.Manifests("deploy"))
	plain.Manifests.Namespace = target.Name
	chart := builder.Component("chart", builder.Chart("chart", builder.Values(`{"failHook": false}`)), builder.DependsOn("plain"))
	chart.Helm.Namespace = target.Name
	env = operatortest.Env(ns, name).ServiceAccount(operatortest.Deployer).AppSource().Components(plain, chart).Create(t, operatortest.Admin)
	env = operatortest.WaitForEnv(t, client.ObjectKeyFromObject(env), func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
	})
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: target.Name, Name: "plain"}, &corev1.ConfigMap{})).To(Succeed())
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: target.Name, Name: "chart-config"}, &corev1.ConfigMap{})).To(Succeed())
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)
	return env, target
}

// TestDeletionWithTargetNamespaceGone: the namespace a release and a
// manifest component deployed into is deleted by hand, with everything in
// it; deleting the environment still completes. envtest runs no namespace
// controller, so the test empties the namespace and finalizes it itself.
func TestDeletionWithTargetNamespaceGone(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	env, target := deployedIntoTarget(t, "away")
	ns := env.Namespace

	// The namespace goes, with everything in it (release storage included),
	// as the namespace controller would do it.
	g.Expect(operatortest.Admin.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(target.Name))).To(Succeed())
	g.Expect(operatortest.Admin.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(target.Name))).To(Succeed())
	g.Expect(operatortest.Admin.Delete(ctx, target)).To(Succeed())
	finalizeNamespace(t, target.Name)

	g.Expect(operatortest.Admin.Delete(ctx, env)).To(Succeed())
	operatortest.ExpectEnvGone(t, ns, "away")
}

// TestDeletionWithTargetNamespaceTerminating: the target namespace is
// being deleted (stuck Terminating, as envtest leaves it) when the
// environment is deleted; uninstall and prune still delete what is there
// and the deletion completes.
func TestDeletionWithTargetNamespaceTerminating(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	env, target := deployedIntoTarget(t, "leaving")
	ns := env.Namespace

	g.Expect(operatortest.Admin.Delete(ctx, target)).To(Succeed())
	g.Expect(operatortest.Admin.Delete(ctx, env)).To(Succeed())
	operatortest.ExpectEnvGone(t, ns, "leaving")
	operatortest.ExpectGone(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: target.Name, Name: "plain"}})
	operatortest.ExpectGone(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: target.Name, Name: "chart-config"}})
	finalizeNamespace(t, target.Name)
}

// bindDeployer lets the ServiceAccount saNS/sa do anything in namespace
// target, as a tenant's deployer of a second namespace would.
func bindDeployer(t testing.TB, target, saNS, sa string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(operatortest.Admin.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: target, Name: "deployer"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}})).To(Succeed())
	g.Expect(operatortest.Admin.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: target, Name: "deployer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "deployer"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: saNS, Name: sa}}})).To(Succeed())
}

// finalizeNamespace does what the namespace controller does last: it
// clears the namespace's finalizers, so the namespace is gone.
func finalizeNamespace(t *testing.T, name string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	g.Eventually(func() error {
		ns := &corev1.Namespace{}
		if err := operatortest.Admin.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
			return err
		}
		ns.Spec.Finalizers = nil
		return operatortest.Admin.SubResource("finalize").Update(ctx, ns)
	}, operatortest.Timeout).Should(Succeed())
	operatortest.ExpectGone(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
}

// TestDeletionWhenItsNamespaceIsDeleted: deleting the environment's own
// namespace removes the deployer's rights (the namespace controller
// deletes Roles and bindings with everything else) while the environment
// still has a release to uninstall; its removal must not wedge the
// namespace. envtest runs no namespace controller: the test removes the
// rights and deletes the environment itself.
func TestDeletionWhenItsNamespaceIsDeleted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := operatortest.DeployNamespace(t)
	operatortest.AppFiles(t, ns, operatortest.DirFiles(t, filepath.Join("testdata", "charts", "hookfail"), "chart"))
	env := operatortest.Env(ns, "doomed").ServiceAccount(operatortest.Deployer).AppSource().Components(builder.Component("chart", builder.Chart("chart", builder.Values(`{"failHook": false}`)))).Create(t, operatortest.Admin)
	key := client.ObjectKeyFromObject(env)
	env = operatortest.WaitForEnv(t, key, operatortest.ExpectReadyAndCurrent)
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)

	g.Expect(operatortest.Admin.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	g.Expect(operatortest.Admin.Delete(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deployer"}})).To(Succeed())
	g.Expect(operatortest.Admin.Delete(ctx, env)).To(Succeed())
	operatortest.ExpectEnvGone(t, ns, "doomed")
}

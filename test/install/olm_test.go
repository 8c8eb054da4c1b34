package install

import (
	"bytes"
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/devloop-dev/devloop/internal/olm"
	"github.com/devloop-dev/devloop/internal/testenv"
)

// opmPath is the opm `make test` builds (hack/opm.sh).
func opmPath(t *testing.T) string {
	t.Helper()
	version := os.Getenv("OPM_VERSION")
	if version == "" {
		version = "1.73.0"
	}
	p := filepath.Join(testenv.RepoRoot(), "bin", "opm", "v"+version, "opm")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("no opm at %s: run hack/opm.sh (make test builds it)", p)
	}
	return p
}

func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[rel] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// bundle/ and config/olm/installer-rbac.yaml are what make bundle writes
// from the current config/: regenerated here and compared.
func TestBundleIsUpToDate(t *testing.T) {
	root := testenv.RepoRoot()
	version, err := olm.BundleVersion(root)
	if err != nil {
		t.Fatal(err)
	}
	want, err := olm.Bundle(root, olm.BundleOptions{Version: version})
	if err != nil {
		t.Fatal(err)
	}
	have := readTree(t, filepath.Join(root, "bundle"))
	for name, data := range want {
		if !bytes.Equal(have[name], data) {
			t.Errorf("bundle/%s is stale: run make bundle", name)
		}
	}
	for name := range have {
		if _, ok := want[name]; !ok {
			t.Errorf("bundle/%s is not generated any more: run make bundle", name)
		}
	}
	rbac, err := olm.InstallerRBAC(root)
	if err != nil {
		t.Fatal(err)
	}
	if committed, _ := os.ReadFile(filepath.Join(root, "config", "olm", "installer-rbac.yaml")); !bytes.Equal(committed, rbac) {
		t.Errorf("config/olm/installer-rbac.yaml is stale: run make bundle")
	}
}

func readCSV(t *testing.T) *operatorsv1alpha1.ClusterServiceVersion {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "bundle", "manifests", "devloop.clusterserviceversion.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	csv := &operatorsv1alpha1.ClusterServiceVersion{}
	if err := yaml.UnmarshalStrict(data, csv); err != nil {
		t.Fatal(err)
	}
	return csv
}

// What OLM v1 accepts: a registry+v1 bundle with AllNamespaces, no
// webhooks, no dependencies; the CSV owns the CRD it ships.
func TestCSVFitsOLMv1(t *testing.T) {
	csv := readCSV(t)
	for _, m := range csv.Spec.InstallModes {
		if m.Supported != (m.Type == operatorsv1alpha1.InstallModeTypeAllNamespaces) {
			t.Errorf("install mode %s supported=%v: OLM v1 wants AllNamespaces only", m.Type, m.Supported)
		}
	}
	if len(csv.Spec.WebhookDefinitions) > 0 || len(csv.Spec.APIServiceDefinitions.Owned) > 0 {
		t.Error("the CSV declares webhooks or API services, which OLM v1 does not install")
	}
	if csv.Spec.MinKubeVersion == "" || csv.Spec.Version.String() == "" {
		t.Errorf("minKubeVersion %q, version %q", csv.Spec.MinKubeVersion, csv.Spec.Version.String())
	}
	owned := csv.Spec.CustomResourceDefinitions.Owned
	if len(owned) != 1 || owned[0].Name != "devenvironments.devloop.dev" || owned[0].Description == "" || owned[0].DisplayName == "" {
		t.Errorf("owned CRDs %+v", owned)
	}
	if _, err := os.Stat(filepath.Join(testenv.RepoRoot(), "bundle", "metadata", "dependencies.yaml")); err == nil {
		t.Error("bundle/metadata/dependencies.yaml: OLM v1 resolves no package dependencies")
	}
	dep := csv.Spec.InstallStrategy.StrategySpec.DeploymentSpecs[0].Spec.Template.Spec.Containers[0]
	if envValue(dep, "DEVLOOP_HELPER_IMAGE") != dep.Image || csv.Annotations["containerImage"] != dep.Image {
		t.Errorf("helper image %q, containerImage %q, manager image %q: all three must be equal", envValue(dep, "DEVLOOP_HELPER_IMAGE"), csv.Annotations["containerImage"], dep.Image)
	}
}

// localRegistry is a registry in memory on the loopback address.
func localRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// opmEnv is a HOME for opm whose containers/image configuration trusts the
// loopback registry over plain HTTP.
func opmEnv(t *testing.T, host string) []string {
	t.Helper()
	home := t.TempDir()
	dir := filepath.Join(home, ".config", "containers")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"policy.json":     `{"default":[{"type":"insecureAcceptAnything"}]}`,
		"registries.conf": "[[registry]]\nlocation = \"" + host + "\"\ninsecure = true\n",
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return append(os.Environ(), "HOME="+home)
}

// The bundle image passes operator-framework/api's bundle validators (the
// CSV, the CRD and the bundle format), run by opm on the pushed image.
func TestBundleImageValidates(t *testing.T) {
	opm := opmPath(t)
	root := testenv.RepoRoot()
	host := localRegistry(t)
	version, err := olm.BundleVersion(root)
	if err != nil {
		t.Fatal(err)
	}
	imgs, err := olm.PushImages(context.Background(), root, host+"/devloop-dev", version, true)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(opm, "alpha", "bundle", "validate", "--image-builder", "none", "--tag", imgs.Bundle)
	cmd.Env = opmEnv(t, host)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "All validation tests have been completed successfully") {
		t.Fatalf("opm alpha bundle validate %s: %v\n%s", imgs.Bundle, err, out)
	}
}

// catalog/devloop is what make catalog renders from the semver template,
// and opm validates it.
func TestCatalogIsUpToDateAndValid(t *testing.T) {
	opm := opmPath(t)
	root := testenv.RepoRoot()
	rendered, err := olm.RenderCatalog(context.Background(), root, opm)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile(filepath.Join(root, "catalog", "devloop", "catalog.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(rendered, committed) {
		t.Errorf("catalog/devloop/catalog.yaml is stale: run make catalog")
	}
	for _, want := range []string{"name: stable-v0", "name: fast-v0", "defaultChannel: stable-v0", "image: " + olm.BundleRepository + ":v"} {
		if !bytes.Contains(committed, []byte(want)) {
			t.Errorf("catalog lacks %q", want)
		}
	}
	if out, err := exec.Command(opm, "validate", filepath.Join(root, "catalog")).CombinedOutput(); err != nil {
		t.Fatalf("opm validate catalog: %v\n%s", err, out)
	}

	// opm validate does refuse a broken catalog: a channel naming a bundle
	// the catalog lacks.
	broken := t.TempDir()
	bad := bytes.Replace(committed, []byte("entries:\n- name: devloop.v0.1.0\nname: fast-v0"), []byte("entries:\n- name: devloop.v0.9.0\nname: fast-v0"), 1)
	if bytes.Equal(bad, committed) {
		t.Fatal("could not break the catalog: its fast-v0 channel changed shape")
	}
	if err := os.MkdirAll(filepath.Join(broken, "devloop"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(broken, "devloop", "catalog.yaml"), bad, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(opm, "validate", broken).CombinedOutput(); err == nil {
		t.Fatalf("opm validate accepted a channel naming a missing bundle:\n%s", out)
	}
}

// The installer ServiceAccount of config/olm may create everything OLM v1
// makes of the bundle: the real API server checks its rights, including
// Kubernetes' refusal to let anyone grant rights they lack.
func TestInstallerServiceAccountCanInstallTheBundle(t *testing.T) {
	ctx := context.Background()
	root := testenv.RepoRoot()
	ensureRestrictedNamespace(t, ctx, olm.InstallNamespace)
	data, err := os.ReadFile(filepath.Join(root, "config", "olm", "installer-rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rbacObjs, err := decode(string(data))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range rbacObjs {
		if err := k8s.Patch(ctx, o, client.Apply, client.FieldOwner("devloop-install-test"), client.ForceOwnership); err != nil {
			t.Fatalf("applying %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + olm.InstallNamespace + ":" + olm.InstallerServiceAccount}
	installer, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}

	objs := olmInstallObjects(t, readCSV(t))
	for _, f := range []string{"devloop.dev_devenvironments.yaml", "devloop-editor_clusterrole.yaml", "devloop-viewer_clusterrole.yaml", "devloop-manager-metrics_service.yaml"} {
		data, err := os.ReadFile(filepath.Join(root, "bundle", "manifests", f))
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &u.Object); err != nil {
			t.Fatal(err)
		}
		if u.GetKind() == "Service" {
			u.SetNamespace(olm.InstallNamespace)
		}
		objs = append(objs, u)
	}
	// Applied for real, in order: a binding's escalation check needs the
	// role it names to exist.
	for _, o := range objs {
		err := installer.Patch(ctx, o.DeepCopy(), client.Apply, client.FieldOwner("olm"), client.ForceOwnership)
		if err != nil {
			t.Errorf("as the installer: %s %s: %v", o.GetKind(), o.GetName(), err)
		}
		if o.GetKind() == "Deployment" {
			d := deploymentOf(t, []*unstructured.Unstructured{o}, o.GetName())
			dryRunPod(t, ctx, d)
		}
	}

	// OLM v1 watches what it installed as the installer, in all
	// namespaces.
	for _, list := range []client.ObjectList{&corev1.ServiceAccountList{}, &corev1.ServiceList{}, &appsv1.DeploymentList{},
		&rbacv1.ClusterRoleList{}, &rbacv1.ClusterRoleBindingList{}} {
		if err := installer.List(ctx, list, client.Limit(1)); err != nil {
			t.Errorf("as the installer, listing %T in all namespaces: %v", list, err)
		}
	}

	// And it may not grant what it lacks.
	greedy := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "greedy"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"delete"}}}}
	if err := installer.Create(ctx, greedy, client.DryRunAll); !apierrors.IsForbidden(err) {
		t.Errorf("the installer created a ClusterRole beyond its rights: %v", err)
	}
}

// olmInstallObjects are the objects OLM v1 makes of the CSV in
// AllNamespaces mode: the ServiceAccount, the Deployment, and a
// ClusterRole and binding per permission set (any name: the installer's
// rights on them are not by name).
func olmInstallObjects(t *testing.T, csv *operatorsv1alpha1.ClusterServiceVersion) []*unstructured.Unstructured {
	t.Helper()
	var out []any
	spec := csv.Spec.InstallStrategy.StrategySpec
	ns := olm.InstallNamespace
	for _, p := range spec.ClusterPermissions {
		name := csv.Name + "-" + p.ServiceAccountName
		out = append(out,
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: p.ServiceAccountName, Namespace: ns}},
			&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: p.Rules},
			&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
				Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: p.ServiceAccountName, Namespace: ns}}})
	}
	// devloop installs in AllNamespaces mode, where OLM v1 turns the
	// namespaced permissions into ClusterRoles too, with get, list and
	// watch on namespaces added (as OLM v0 does for a global
	// OperatorGroup); the real OLM of the end-to-end suite does exactly
	// that (TestOLMInstallsAndUpgradesDevloop).
	for _, p := range spec.Permissions {
		name := csv.Name + "-" + p.ServiceAccountName + "-promoted"
		rules := append(append([]rbacv1.PolicyRule(nil), p.Rules...),
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch"}})
		out = append(out,
			&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules},
			&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
				Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: p.ServiceAccountName, Namespace: ns}}})
	}
	for _, d := range spec.DeploymentSpecs {
		out = append(out, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: d.Name, Namespace: ns, Labels: d.Label}, Spec: d.Spec})
	}
	var objs []*unstructured.Unstructured
	s := testenv.Scheme()
	for _, o := range out {
		obj := o.(client.Object)
		gvks, _, err := s.ObjectKinds(obj)
		if err != nil {
			t.Fatal(err)
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: m}
		u.SetGroupVersionKind(gvks[0])
		objs = append(objs, u)
	}
	return objs
}

// config/olm builds, and names the installer, the catalog and the channel
// consistently.
func TestOLMConfig(t *testing.T) {
	objs := buildKustomize(t, "config/olm")
	ext := find(t, objs, "ClusterExtension", olm.ExtensionName)
	cat := find(t, objs, "ClusterCatalog", "devloop")
	find(t, objs, "ServiceAccount", olm.InstallerServiceAccount)
	check := func(obj *unstructured.Unstructured, want string, path ...string) {
		t.Helper()
		got, _, _ := unstructured.NestedFieldNoCopy(obj.Object, path...)
		if s := strings.TrimSpace(strings.Trim(strings.ReplaceAll(fmtAny(got), "\n", " "), "[]")); s != want {
			t.Errorf("%s .%s = %q, want %q", obj.GetKind(), strings.Join(path, "."), s, want)
		}
	}
	check(ext, olm.InstallNamespace, "spec", "namespace")
	check(ext, olm.InstallerServiceAccount, "spec", "serviceAccount", "name")
	check(ext, olm.Package, "spec", "source", "catalog", "packageName")
	check(ext, olm.DefaultChannel, "spec", "source", "catalog", "channels")
	check(ext, "devloop", "spec", "source", "catalog", "selector", "matchLabels", "olm.operatorframework.io/metadata.name")
	version, err := olm.BundleVersion(testenv.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	check(cat, olm.CatalogRepository+":v"+version, "spec", "source", "image", "ref")
}

func fmtAny(v any) string {
	if list, ok := v.([]any); ok {
		var parts []string
		for _, e := range list {
			parts = append(parts, fmtAny(e))
		}
		return strings.Join(parts, " ")
	}
	s, _ := v.(string)
	return s
}

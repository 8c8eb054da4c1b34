//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	. "github.com/devloop-dev/devloop/test/builder"
	. "github.com/devloop-dev/devloop/test/e2e/fixture"
	"github.com/devloop-dev/devloop/test/e2e/poll"
)

// widgetsTemplate is what the build step generates the CRD from, as
// controller-gen generates CRDs from Go types: GROUP is replaced.
const widgetsTemplate = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.GROUP
spec:
  group: GROUP
  names: {kind: Widget, listKind: WidgetList, plural: widgets, singular: widget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`

// generateCRDs is the build step: `make manifests` in a project without
// controller-gen in the builder image.
const generateCRDs = `set -e
mkdir -p config/crd/bases
sed "s/GROUP/$CRD_GROUP/g" hack/widgets.yaml.in > config/crd/bases/widgets.yaml
echo generated config/crd/bases/widgets.yaml`

// TestGeneratedCRDIsApplied is issue 18's generated manifests on the real
// cluster: a builder Job's run step writes a CRD into config/crd/bases,
// its assemble container pushes that directory as the image's output, and
// a later component applies it through an output source; a custom
// resource of it can then be created. A push that does not change what
// the step generates builds again, with the same output digest, and leaves
// the CRD alone.
func TestGeneratedCRDIsApplied(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := need(t)
	ns := namespace(t, "e2e-outputs")
	group := ns + ".devloop.dev"
	crdName := "widgets." + group
	allowCRDs(t, ns, "deployer")
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	t.Cleanup(func() {
		gone := crd.DeepCopy()
		gone.SetName(crdName)
		_ = c.Client.Delete(context.Background(), gone)
	})
	dir := sourceDir(t, Files{
		"hack/widgets.yaml.in": widgetsTemplate,
		"hack/generate.sh":     generateCRDs,
		"NOTES.md":             "first\n",
	})
	env := newEnv(ns, "outputs").Registry().
		Source(v1alpha1.Source{Name: "crds", Output: &v1alpha1.BuildOutputReference{Image: "operator", Name: "crds"}}).
		Components(
			Component("operator", Images(Image("operator", Base(busybox),
				Run(&v1alpha1.BuildRun{Image: goImage,
					Command: []string{"sh", "hack/generate.sh"},
					Env:     []v1alpha1.EnvVar{{Name: "CRD_GROUP", Value: group}},
					Outputs: []v1alpha1.RunOutput{{Name: "crds", Path: "config/crd/bases"}}}),
				Layer("config/crd/bases", "/crds")))),
			// No dependsOn: using the output source orders it after the
			// build.
			Component("crds", ManifestsOf("crds"))).Build()
	pushOnly(t, env, dir)
	g.Expect(c.Client.Create(ctx, env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)
	first := waitEnv(t, key, 6*time.Minute, false, func(g Gomega, env *v1alpha1.DevEnvironment) {
		readyNow(g, env)
		g.Expect(imageOf(env, "operator")).NotTo(BeNil())
		g.Expect(imageOf(env, "operator").Outputs).To(HaveLen(1))
	})
	img := imageOf(first, "operator")
	out := img.Outputs[0]
	t.Logf("built operator by %s; output crds %s@%s", img.Build.Job, out.Repository, out.Digest)
	g.Expect(out.Repository).To(Equal(registry + "/" + ns + "/operator/outputs/crds"))
	g.Expect(first.Status.Sources).To(ContainElement(And(
		HaveField("Name", "crds"), HaveField("Revision", "operator/crds@"+out.Digest), HaveField("Digest", out.Digest))))

	waitCheck(t, poll.Wait{What: "CRD " + crdName + " applied and Established", Every: 10 * time.Millisecond, Within: time.Minute}, func(g Gomega) {
		g.Expect(c.Client.Get(ctx, client.ObjectKey{Name: crdName}, crd)).To(Succeed(), "the generated CRD is applied")
		conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		g.Expect(conds).To(ContainElement(And(HaveKeyWithValue("type", "Established"), HaveKeyWithValue("status", "True"))))
	})
	widget := &unstructured.Unstructured{}
	widget.SetGroupVersionKind(schema.GroupVersionKind{Group: group, Version: "v1", Kind: "Widget"})
	widget.SetNamespace(ns)
	widget.SetName("first")
	g.Expect(c.Client.Create(ctx, widget)).To(Succeed(), "the CRD serves its kind")
	applied := crd.GetResourceVersion()

	// An unrelated change: the step runs again, generates the same file,
	// and the output keeps its digest.
	appendToFile(t, filepath.Join(dir, "NOTES.md"), "second\n")
	push(t, env, dir)
	second := waitEnv(t, key, 6*time.Minute, false, func(g Gomega, env *v1alpha1.DevEnvironment) {
		readyNow(g, env)
		now := imageOf(env, "operator")
		g.Expect(now).NotTo(BeNil())
		g.Expect(now.Inputs).NotTo(Equal(img.Inputs), "the push changed the image's inputs")
		g.Expect(now.Build).NotTo(BeNil())
		g.Expect(now.Build.Job).NotTo(Equal(img.Build.Job), "built again")
		g.Expect(now.Build.Result).To(Equal(v1alpha1.BuildSucceeded))
	})
	g.Expect(imageOf(second, "operator").Outputs).To(Equal([]v1alpha1.OutputStatus{out}), "the same files, the same digest")
	g.Expect(c.Client.Get(ctx, client.ObjectKey{Name: crdName}, crd)).To(Succeed())
	g.Expect(crd.GetResourceVersion()).To(Equal(applied), "nothing applied again")
}

// allowCRDs lets sa manage CRDs, which are cluster-scoped, for the test.
func allowCRDs(t *testing.T, ns, sa string) {
	t.Helper()
	c := need(t)
	ctx := context.Background()
	name := "crds-" + ns
	g := NewWithT(t)
	g.Expect(c.Client.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"apiextensions.k8s.io"},
			Resources: []string{"customresourcedefinitions"}, Verbs: []string{"*"}}}})).To(Succeed())
	g.Expect(c.Client.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}}})).To(Succeed())
	t.Cleanup(func() {
		_ = c.Client.Delete(context.Background(), &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}})
		_ = c.Client.Delete(context.Background(), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})
}

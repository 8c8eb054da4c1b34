package deploy

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/fault"
)

const patchField = "spec.components[2].helm.patches"

// renderedObjects are what a chart might render: two Deployments (one
// with a sidecar), a Service and a custom resource.
func renderedObjects(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	return []*unstructured.Unstructured{
		fromYAML(t, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {app: web, tier: front}}
spec:
  replicas: 1
  template:
    spec:
      containers:
      - {name: web, image: web:1, args: [--port=8080]}
      - {name: proxy, image: envoy:1}
`),
		fromYAML(t, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: worker, namespace: jobs, labels: {app: worker}}
spec:
  template:
    spec:
      containers:
      - {name: worker, image: worker:1, args: [run]}
`),
		fromYAML(t, `
apiVersion: v1
kind: Service
metadata: {name: web}
spec: {ports: [{port: 80}]}
`),
		fromYAML(t, `
apiVersion: demo.devloop.dev/v1
kind: Validator
metadata: {name: web}
spec: {plugins: [a, b], version: "1"}
`),
	}
}

func compile(t *testing.T, patches ...v1alpha1.Patch) *Patches {
	t.Helper()
	ps, err := CompilePatches(patchField, patches, "team-a")
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

func containers(g Gomega, o *unstructured.Unstructured) []any {
	list, found, err := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue())
	return list
}

func TestStrategicMergePatchSelectsByKindAndName(t *testing.T) {
	g := NewWithT(t)
	objs := renderedObjects(t)
	ps := compile(t, v1alpha1.Patch{Patch: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  template:
    spec:
      containers:
      - name: web
        args: [--debug, --port=8080]
        securityContext: {runAsNonRoot: true}
`})
	g.Expect(applyAll(ps, objs)).To(Succeed())

	// Containers merge by name: web changed, the proxy sidecar kept.
	cs := containers(g, objs[0])
	g.Expect(cs).To(HaveLen(2))
	g.Expect(cs[0]).To(HaveKeyWithValue("args", []any{"--debug", "--port=8080"}))
	g.Expect(cs[0]).To(HaveKeyWithValue("image", "web:1"))
	g.Expect(cs[0]).To(HaveKeyWithValue("securityContext", map[string]any{"runAsNonRoot": true}))
	g.Expect(cs[1]).To(HaveKeyWithValue("name", "proxy"))
	g.Expect(objs[0].GetName()).To(Equal("web"))
	replicas, _, _ := unstructured.NestedInt64(objs[0].Object, "spec", "replicas")
	g.Expect(replicas).To(Equal(int64(1)), "integers stay int64")

	// Same name, other kinds: untouched.
	g.Expect(objs[2].Object["spec"]).NotTo(HaveKey("template"))
	g.Expect(containers(g, objs[1])[0]).To(HaveKeyWithValue("args", []any{"run"}))
}

func TestMergePatchOfACustomResourceReplacesLists(t *testing.T) {
	g := NewWithT(t)
	objs := renderedObjects(t)
	ps := compile(t, v1alpha1.Patch{Patch: "apiVersion: demo.devloop.dev/v1\nkind: Validator\nmetadata: {name: web}\nspec: {plugins: [c], debug: true}\n"})
	g.Expect(applyAll(ps, objs)).To(Succeed())
	g.Expect(objs[3].Object["spec"]).To(Equal(map[string]any{"plugins": []any{"c"}, "version": "1", "debug": true}))
}

func TestJSON6902PatchAppliesOnceToEveryTarget(t *testing.T) {
	g := NewWithT(t)
	objs := renderedObjects(t)
	ps := compile(t, v1alpha1.Patch{
		Target: &v1alpha1.PatchTarget{Group: "apps", Kind: "Deployment", Name: "web|work.*"},
		Patch:  "- {op: add, path: /spec/template/spec/containers/0/args/-, value: --v=4}\n",
	})
	g.Expect(applyAll(ps, objs)).To(Succeed())
	g.Expect(containers(g, objs[0])[0]).To(HaveKeyWithValue("args", []any{"--port=8080", "--v=4"}))
	g.Expect(containers(g, objs[1])[0]).To(HaveKeyWithValue("args", []any{"run", "--v=4"}))
}

func TestPatchTargets(t *testing.T) {
	args := func(g Gomega, o *unstructured.Unstructured) any { return containers(g, o)[0].(map[string]any)["args"] }
	addArg := "- {op: add, path: /spec/template/spec/containers/0/args/-, value: --x}\n"
	cases := []struct {
		name       string
		target     v1alpha1.PatchTarget
		web, other bool // whether web and worker are patched
	}{
		{"label selector", v1alpha1.PatchTarget{LabelSelector: "app=web,tier!=back"}, true, false},
		{"namespace defaults to the deploy namespace", v1alpha1.PatchTarget{Kind: "Deployment", Namespace: "team-a"}, true, false},
		{"namespace as rendered", v1alpha1.PatchTarget{Kind: "Deployment", Namespace: "jo.*"}, false, true},
		{"name matched whole", v1alpha1.PatchTarget{Kind: "Deployment", Name: "work"}, false, false},
		{"version", v1alpha1.PatchTarget{Version: "v1", Kind: "Deployment", Name: "worker"}, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			objs := renderedObjects(t)
			target := tc.target
			ps := compile(t, v1alpha1.Patch{Target: &target, Patch: addArg})
			_, err := ps.ApplyAll(objs)
			if !tc.web && !tc.other {
				g.Expect(err).To(MatchError(patchField + "[0]: matches no rendered object"))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(args(g, objs[0])).To(HaveLen(map[bool]int{true: 2, false: 1}[tc.web]))
			g.Expect(args(g, objs[1])).To(HaveLen(map[bool]int{true: 2, false: 1}[tc.other]))
		})
	}
}

func TestPatchErrorsNameThePatch(t *testing.T) {
	cases := []struct {
		name  string
		patch v1alpha1.Patch
		want  string
	}{
		{"operations without target", v1alpha1.Patch{Patch: "- {op: remove, path: /spec}"},
			patchField + "[0]: a JSON6902 patch (a list of operations) needs target"},
		{"strategic merge without kind or name", v1alpha1.Patch{Patch: "spec: {replicas: 2}"},
			patchField + "[0]: a strategic-merge patch without target needs kind and metadata.name"},
		{"delete with fields", v1alpha1.Patch{Target: &v1alpha1.PatchTarget{Kind: "Service"}, Patch: "$patch: delete\nspec: {type: NodePort}"},
			patchField + "[0].patch: $patch: delete leaves the object out and takes no other fields"},
		{"a scalar", v1alpha1.Patch{Patch: "just text"},
			patchField + "[0].patch: must be a partial object"},
		{"unknown operation", v1alpha1.Patch{Target: &v1alpha1.PatchTarget{Kind: "Service"}, Patch: "- {op: merge, path: /spec}"},
			patchField + `[0].patch: invalid operation {"op":"merge","path":"/spec"}`},
		{"bad name expression", v1alpha1.Patch{Target: &v1alpha1.PatchTarget{Name: "web("}, Patch: "spec: {}"},
			patchField + "[0].target.name: error parsing regexp"},
		{"bad label selector", v1alpha1.Patch{Target: &v1alpha1.PatchTarget{LabelSelector: "a=b=c"}, Patch: "spec: {}"},
			patchField + "[0].target.labelSelector:"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := CompilePatches(patchField, []v1alpha1.Patch{tc.patch}, "team-a")
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
			g.Expect(fault.IsPermanent(err)).To(BeTrue())
		})
	}
}

func TestPatchThatDoesNotApplyNamesTheObject(t *testing.T) {
	g := NewWithT(t)
	ps := compile(t,
		v1alpha1.Patch{Patch: "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {type: NodePort}\n"},
		v1alpha1.Patch{Target: &v1alpha1.PatchTarget{Kind: "Deployment", Name: "worker"},
			Patch: "- {op: replace, path: /spec/template/spec/nodeName, value: n1}"})
	_, err := ps.ApplyAll(renderedObjects(t))
	g.Expect(err).To(MatchError(ContainSubstring(patchField + "[1]: Deployment jobs/worker: replace operation does not apply")))
	g.Expect(fault.IsPermanent(err)).To(BeTrue())
}

func TestUnmatchedPatchesAreListed(t *testing.T) {
	g := NewWithT(t)
	ps := compile(t,
		v1alpha1.Patch{Patch: "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {type: NodePort}\n"},
		// apiVersion v1 is the core group: the apps Deployment is not it.
		v1alpha1.Patch{Patch: "apiVersion: v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 3}\n"},
		v1alpha1.Patch{Patch: "kind: Deployment\nmetadata: {name: web, namespace: elsewhere}\nspec: {replicas: 3}\n"})
	objs := renderedObjects(t)
	_, err := ps.ApplyAll(objs)
	g.Expect(err).To(MatchError(patchField + "[1], " + patchField + "[2]: matches no rendered object"))
	g.Expect(fault.IsPermanent(err)).To(BeTrue())
}

func TestPatchesAreDeterministic(t *testing.T) {
	g := NewWithT(t)
	ps := compile(t,
		v1alpha1.Patch{Target: &v1alpha1.PatchTarget{Kind: "Deployment"},
			Patch: "- {op: add, path: /metadata/annotations, value: {a: '1'}}"},
		v1alpha1.Patch{Target: &v1alpha1.PatchTarget{LabelSelector: "app"},
			Patch: "metadata: {annotations: {b: '2'}}\nspec: {template: {spec: {containers: [{name: sidecar, image: x}]}}}"})
	a, b := renderedObjects(t), renderedObjects(t)
	g.Expect(applyAll(ps, a)).To(Succeed())
	g.Expect(applyAll(ps, b)).To(Succeed())
	da, err := manifestsDigest(a)
	g.Expect(err).NotTo(HaveOccurred())
	db, err := manifestsDigest(b)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(da).To(Equal(db))
	g.Expect(a[0].GetAnnotations()).To(Equal(map[string]string{"a": "1", "b": "2"}))
	g.Expect(containers(g, a[0])).To(HaveLen(3))
}

func TestNoPatches(t *testing.T) {
	g := NewWithT(t)
	ps, err := CompilePatches(patchField, nil, "team-a")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ps.Len()).To(BeZero())
	objs, err := ps.ApplyAll(renderedObjects(t))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(objs).To(HaveLen(len(renderedObjects(t))))
}

// TestADeletePatchLeavesTheObjectOut: `$patch: delete` (kustomize's
// directive) leaves out every object it selects, by target or by its own
// kind and name; what it does not select is kept and patched as before.
func TestADeletePatchLeavesTheObjectOut(t *testing.T) {
	g := NewWithT(t)
	ps := compile(t,
		v1alpha1.Patch{Target: &v1alpha1.PatchTarget{Kind: "Deployment"}, Patch: "$patch: delete"},
		v1alpha1.Patch{Patch: "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {type: NodePort}\n"})
	objs, err := ps.ApplyAll(renderedObjects(t))
	g.Expect(err).NotTo(HaveOccurred())
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetKind()+"/"+o.GetName())
	}
	g.Expect(kinds).To(Equal([]string{"Service/web", "Validator/web"}))
	g.Expect(objs[0].Object).To(HaveKeyWithValue("spec", HaveKeyWithValue("type", "NodePort")))

	ps = compile(t, v1alpha1.Patch{Patch: "apiVersion: demo.devloop.dev/v1\nkind: Validator\nmetadata: {name: web}\n$patch: delete\n"})
	objs, err = ps.ApplyAll(renderedObjects(t))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(objs).To(HaveLen(len(renderedObjects(t)) - 1))
	for _, o := range objs {
		g.Expect(o.GetKind()).NotTo(Equal("Validator"))
	}

	// One that selects nothing is named, as any patch.
	ps = compile(t, v1alpha1.Patch{Target: &v1alpha1.PatchTarget{Kind: "CustomResourceDefinition"}, Patch: "$patch: delete"})
	_, err = ps.ApplyAll(renderedObjects(t))
	g.Expect(err).To(MatchError(patchField + "[0]: matches no rendered object"))
}

// applyAll is ApplyAll for patches that leave no object out: only its
// error.
func applyAll(ps *Patches, objs []*unstructured.Unstructured) error {
	_, err := ps.ApplyAll(objs)
	return err
}

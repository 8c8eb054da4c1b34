package install

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/devloop-dev/devloop/internal/testenv"
)

// The chart with its default values installs what `kustomize build
// config/default` installs: the same objects under the same names, the
// same CRD, the same rules and the same manager pod. config/ is the source
// (make manifests writes it and copies the CRD and the manager's rules into
// the chart); this test fails when either side is edited alone.
func TestChartAndKustomizeDoNotDrift(t *testing.T) {
	chart := byID(renderChart(t, nil))
	kust := byID(buildKustomize(t, "config/default"))
	delete(kust, "Namespace//devloop-system") // Helm installs into an existing namespace (--create-namespace)
	withoutChartServiceTLS(t, chart)

	if a, b := keys(chart), keys(kust); !reflect.DeepEqual(a, b) {
		t.Fatalf("object sets differ\nchart:     %s\nkustomize: %s", strings.Join(a, " "), strings.Join(b, " "))
	}
	for id, k := range kust {
		c := chart[id]
		var paths [][]string
		switch k.GetKind() {
		case "CustomResourceDefinition":
			paths = [][]string{{"spec"}}
		case "ClusterRole", "Role":
			paths = [][]string{{"rules"}}
			for key, v := range k.GetLabels() {
				if strings.HasPrefix(key, "rbac.authorization.k8s.io/") && c.GetLabels()[key] != v {
					t.Errorf("%s: label %s=%s in kustomize, %q in the chart", id, key, v, c.GetLabels()[key])
				}
			}
		case "ClusterRoleBinding", "RoleBinding":
			paths = [][]string{{"roleRef"}, {"subjects"}}
		case "Deployment":
			paths = [][]string{{"spec", "replicas"}, {"spec", "template", "spec"}, {"spec", "template", "metadata", "annotations"}}
		case "Service":
			paths = [][]string{{"spec", "ports"}}
		case "ServiceAccount":
		default:
			t.Errorf("%s: no comparison for kind %s", id, k.GetKind())
		}
		for _, p := range paths {
			kv, _, _ := unstructured.NestedFieldNoCopy(k.Object, p...)
			cv, _, _ := unstructured.NestedFieldNoCopy(c.Object, p...)
			if kv == nil || !reflect.DeepEqual(kv, cv) {
				t.Errorf("%s: .%s differs\nkustomize: %v\nchart:     %v", id, strings.Join(p, "."), kv, cv)
			}
		}
	}
}

// The chart's copies of generated files are byte for byte the generated
// files (make manifests copies them).
func TestChartCopiesOfGeneratedFiles(t *testing.T) {
	root := testenv.RepoRoot()
	pairs := map[string]string{
		"config/crd/bases/devloop.dev_devenvironments.yaml": "charts/devloop/crds/devloop.dev_devenvironments.yaml",
		"config/rbac/role.yaml":                             "charts/devloop/files/manager-role.yaml",
	}
	for src, dst := range pairs {
		a, err := os.ReadFile(filepath.Join(root, src))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(root, dst))
		if err != nil {
			t.Fatal(err)
		}
		if string(a) != string(b) {
			t.Errorf("%s differs from %s: run make manifests", dst, src)
		}
	}
}

// withoutChartServiceTLS removes the one thing the chart has and
// config/default cannot: the services' CA and certificates, which the chart
// makes with genCA at install (kustomize has no certificate generator, so
// config/default's manager makes its build cache certificate at start, as
// the chart's did before). Everything else must still be equal.
func withoutChartServiceTLS(t *testing.T, chart map[string]*unstructured.Unstructured) {
	t.Helper()
	if _, ok := chart["Secret/devloop-system/devloop-service-tls"]; !ok {
		t.Fatalf("the chart makes no Secret devloop-service-tls (%s)", strings.Join(keys(chart), " "))
	}
	delete(chart, "Secret/devloop-system/devloop-service-tls")
	d := chart["Deployment/devloop-system/devloop-manager"]
	spec := d.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	var volumes []any
	for _, v := range spec["volumes"].([]any) {
		if v.(map[string]any)["name"] != "service-tls" {
			volumes = append(volumes, v)
		}
	}
	spec["volumes"] = volumes
	for _, c := range spec["containers"].([]any) {
		c := c.(map[string]any)
		var mounts, args []any
		for _, m := range c["volumeMounts"].([]any) {
			if m.(map[string]any)["name"] != "service-tls" {
				mounts = append(mounts, m)
			}
		}
		for _, a := range c["args"].([]any) {
			if !strings.HasPrefix(a.(string), "--build-cache-ca-file=") && !strings.HasPrefix(a.(string), "--build-cache-tls-") && !strings.HasPrefix(a.(string), "--registry-token-tls-") {
				args = append(args, a)
			}
		}
		c["volumeMounts"], c["args"] = mounts, args
	}
}

func byID(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	out := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		out[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = o
	}
	return out
}

func keys(m map[string]*unstructured.Unstructured) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

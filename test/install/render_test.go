package install

import (
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/devloop-dev/devloop/internal/testenv"
)

const (
	releaseName = "devloop"
	namespace   = "devloop-system"
)

var chartDir = filepath.Join(testenv.RepoRoot(), "charts", "devloop")

// renderChart renders the chart as `helm template devloop charts/devloop
// --namespace devloop-system --include-crds` with vals.
func renderChart(t *testing.T, vals map[string]any) []*unstructured.Unstructured {
	t.Helper()
	objs, err := tryRenderChart(vals)
	if err != nil {
		t.Fatalf("rendering the chart: %v", err)
	}
	return objs
}

func tryRenderChart(vals map[string]any) ([]*unstructured.Unstructured, error) {
	chrt, err := loader.Load(chartDir)
	if err != nil {
		return nil, err
	}
	install := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	install.ClientOnly = true
	install.DryRun = true
	install.Replace = true
	install.IncludeCRDs = true
	install.ReleaseName = releaseName
	install.Namespace = namespace
	install.KubeVersion = &chartutil.KubeVersion{Version: "v1.36.3", Major: "1", Minor: "36"}
	rel, err := install.Run(chrt, vals)
	if err != nil {
		return nil, err
	}
	return decode(rel.Manifest)
}

// buildKustomize is `kustomize build dir`.
func buildKustomize(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(testenv.RepoRoot(), dir))
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	out, err := res.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decode(string(out))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// decode splits a multi-document YAML stream into objects, skipping empty
// documents.
func decode(manifest string) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(manifest)), 4096)
	var objs []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
}

// find returns the object of kind and name, failing the test if absent.
func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	var have []string
	for _, o := range objs {
		have = append(have, o.GetKind()+"/"+o.GetName())
	}
	t.Fatalf("no %s/%s among %s", kind, name, strings.Join(have, ", "))
	return nil
}

func ids(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName())
	}
	return out
}

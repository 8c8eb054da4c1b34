package helm

import (
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"sigs.k8s.io/yaml"

	"github.com/devloop-dev/devloop/internal/testfiles"
)

// configMapChart is a chart's files: Chart.yaml (with extra lines, such
// as dependencies) and one ConfigMap named <release>-<chart name>, so a
// rendering shows which charts took part.
func configMapChart(name, version, chartYAML string) map[string]string {
	return map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: " + name + "\nversion: " + version + "\n" + chartYAML,
		"templates/configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-{{ .Chart.Name }}\n" +
			"data:\n  version: {{ .Chart.Version | quote }}\n",
	}
}

// rendered renders ch as Helm's install does (dependencies processed
// with the values: conditions, tags and aliases) and returns the names of
// the ConfigMaps it renders, sorted.
func rendered(t testing.TB, ch *chart.Chart, values map[string]any) []string {
	t.Helper()
	if err := chartutil.ProcessDependenciesWithMerge(ch, values); err != nil {
		t.Fatal(err)
	}
	vals, err := chartutil.ToRenderValues(ch, values, chartutil.ReleaseOptions{Name: "rel", Namespace: "ns"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := engine.Render(ch, vals)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, manifest := range out {
		var obj struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if strings.TrimSpace(manifest) == "" {
			continue
		}
		if err := yaml.Unmarshal([]byte(manifest), &obj); err != nil {
			t.Fatal(err)
		}
		names = append(names, obj.Metadata.Name)
	}
	sort.Strings(names)
	return names
}

// subchartVersions are name@version of ch's subcharts, sorted.
func subchartVersions(ch *chart.Chart) []string {
	var out []string
	for _, d := range ch.Dependencies() {
		out = append(out, d.Name()+"@"+d.Metadata.Version)
	}
	sort.Strings(out)
	return out
}

// writeLock writes lock as the chart's Chart.lock.
func writeLock(t testing.TB, dir string, lock *chart.Lock) {
	t.Helper()
	data, err := yaml.Marshal(lock)
	if err != nil {
		t.Fatal(err)
	}
	testfiles.Write(t, dir, map[string]string{"Chart.lock": string(data)})
}

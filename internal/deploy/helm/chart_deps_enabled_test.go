package helm

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/chart"

	"github.com/devloop-dev/devloop/internal/source"
	"github.com/devloop-dev/devloop/internal/testfiles"
	"github.com/devloop-dev/devloop/internal/testregistry/chartrepo"
)

// TestTurnedOffDependenciesAreNotFetched: an umbrella chart whose optional
// subcharts come from a repository this cluster cannot reach (Dynamo's
// platform chart with NATS and etcd off) loads and renders without them
// when the release's values turn them off, by condition or by tags, as
// Helm's install would decide; one left on is an error that names it and
// says how to turn it off. The reachable dependency is still fetched.
func TestTurnedOffDependenciesAreNotFetched(t *testing.T) {
	r := chartrepo.Start(t)
	r.AddFiles(t, configMapChart("operator", "0.2.0", ""))
	const down = "http://127.0.0.1:1/charts"
	root := t.TempDir()
	testfiles.Write(t, filepath.Join(root, "platform"), configMapChart("platform", "0.1.0", `dependencies:
- name: operator
  version: 0.2.x
  repository: `+r.URL+`
  condition: operator.enabled
- name: nats
  version: 1.x
  repository: `+down+`
  condition: nats.enabled
- name: etcd
  version: 0.3.x
  repository: `+down+`
  condition: etcd.deploy,global.etcd.enabled
- name: metrics
  version: 2.x
  repository: `+down+`
  tags: [observability]
`))
	testfiles.Write(t, filepath.Join(root, "platform"), map[string]string{
		"values.yaml": "operator: {enabled: true}\nnats: {enabled: true}\nglobal: {etcd: {enabled: true}}\n",
	})
	art := &source.Artifact{Dir: root}
	load := func(values map[string]any, valuesErr error) (*chart.Chart, error) {
		l := &ChartLoader{CacheDir: t.TempDir()}
		return l.Load(context.Background(), sourceChart("platform"), art, LoadOptions{
			Values: func(top *chart.Chart) (map[string]any, error) {
				if top.Name() != "platform" {
					t.Errorf("values asked for %q, want the top chart", top.Name())
				}
				return values, valuesErr
			},
		})
	}
	off := map[string]any{
		"nats":   map[string]any{"enabled": false},
		"global": map[string]any{"etcd": map[string]any{"enabled": false}}, // etcd.deploy unset: the next path decides
		"tags":   map[string]any{"observability": false},
	}

	t.Run("all three turned off", func(t *testing.T) {
		g := NewWithT(t)
		ch, err := load(off, nil)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(subchartVersions(ch)).To(Equal([]string{"operator@0.2.0"}))
		g.Expect(rendered(t, ch, off)).To(Equal([]string{"rel-operator", "rel-platform"}), "Helm installs it as it is")
	})
	t.Run("a condition left on by the chart's defaults", func(t *testing.T) {
		g := NewWithT(t)
		vals := map[string]any{"global": off["global"], "tags": off["tags"]}
		_, err := load(vals, nil)
		g.Expect(err).To(HaveOccurred())
		g.Expect(err.Error()).To(ContainSubstring(`dependency "nats" (` + down + `, version 1.x)`))
		g.Expect(err.Error()).To(HaveSuffix("; set nats.enabled: false in the values to install without it"))
	})
	t.Run("the first path of a condition that holds a bool decides", func(t *testing.T) {
		g := NewWithT(t)
		vals := map[string]any{"nats": off["nats"], "tags": off["tags"], "etcd": map[string]any{"deploy": true},
			"global": off["global"]}
		_, err := load(vals, nil)
		g.Expect(err).To(HaveOccurred())
		g.Expect(err.Error()).To(ContainSubstring(`dependency "etcd"`))
		g.Expect(err.Error()).To(HaveSuffix("; set etcd.deploy: false in the values to install without it"))
	})
	t.Run("a tag set true keeps it", func(t *testing.T) {
		g := NewWithT(t)
		vals := map[string]any{"nats": off["nats"], "global": off["global"], "tags": map[string]any{"observability": true}}
		_, err := load(vals, nil)
		g.Expect(err).To(HaveOccurred())
		g.Expect(err.Error()).To(ContainSubstring(`dependency "metrics"`))
		g.Expect(err.Error()).To(HaveSuffix("; set tags.observability: false in the values to install without it"))
	})
	t.Run("values that cannot be read fetch everything and say why", func(t *testing.T) {
		g := NewWithT(t)
		_, err := load(nil, errors.New("valuesFrom: ConfigMap platform-values not found"))
		g.Expect(err).To(HaveOccurred())
		g.Expect(err.Error()).To(ContainSubstring(`dependency "nats"`))
		g.Expect(err.Error()).To(ContainSubstring("(reading the values to see whether it is turned off: valuesFrom: ConfigMap platform-values not found)"))
	})
	t.Run("a chart whose subcharts are all in charts/ composes no values", func(t *testing.T) {
		g := NewWithT(t)
		vendored := t.TempDir()
		testfiles.Write(t, filepath.Join(vendored, "app"), configMapChart("app", "0.1.0", "dependencies:\n- name: nats\n  version: 1.x\n  repository: "+down+"\n  condition: nats.enabled\n"))
		testfiles.Write(t, filepath.Join(vendored, "app", "charts", "nats"), configMapChart("nats", "1.0.0", ""))
		l := &ChartLoader{CacheDir: t.TempDir()}
		asked := 0
		ch, err := l.Load(context.Background(), sourceChart("app"), &source.Artifact{Dir: vendored}, LoadOptions{
			Values: func(*chart.Chart) (map[string]any, error) { asked++; return nil, nil },
		})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(subchartVersions(ch)).To(Equal([]string{"nats@1.0.0"}))
		g.Expect(asked).To(BeZero(), "nothing to fetch, nothing to decide")
	})
	t.Run("without values every dependency is fetched, as helm dependency build does", func(t *testing.T) {
		g := NewWithT(t)
		l := &ChartLoader{CacheDir: t.TempDir()}
		_, err := l.Load(context.Background(), sourceChart("platform"), art, LoadOptions{})
		g.Expect(err).To(HaveOccurred())
		g.Expect(err.Error()).To(ContainSubstring(`dependency "nats"`))
	})
}

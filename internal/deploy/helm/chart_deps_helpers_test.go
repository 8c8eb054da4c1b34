package helm

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/registry"
	"helm.sh/helm/v3/pkg/repo"
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

// packageFiles packages the chart whose files are given, as `helm
// package` does, and returns the archive.
func packageFiles(t testing.TB, files map[string]string) []byte {
	t.Helper()
	return packageDir(t, testfiles.Tree(t, files))
}

// packageDir packages the chart in dir as `helm package` does and returns
// the archive.
func packageDir(t testing.TB, dir string) []byte {
	t.Helper()
	ch, err := loader.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	file, err := chartutil.Save(ch, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// chartRepo is an HTTP chart repository: index.yaml and archives under
// /charts/, archive downloads counted, basic auth required when user is
// set, and the Authorization headers it received recorded.
type chartRepo struct {
	*httptest.Server
	URL       string // the repository's URL, .../charts
	downloads atomic.Int32
	user      string
	password  string

	mu       sync.Mutex
	archives map[string][]byte
	index    *repo.IndexFile
	authSeen []string
}

func newChartRepo(t testing.TB) *chartRepo {
	r := &chartRepo{archives: map[string][]byte{}, index: repo.NewIndexFile()}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.Close)
	r.URL = r.Server.URL + "/charts"
	return r
}

// add packages a chart and lists it in the index.
func (r *chartRepo) add(t testing.TB, files map[string]string) {
	t.Helper()
	data := packageFiles(t, files)
	ch, err := loader.LoadArchive(strings.NewReader(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	file := ch.Name() + "-" + ch.Metadata.Version + ".tgz"
	sum := sha256.Sum256(data)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.archives[file] = data
	if err := r.index.MustAdd(ch.Metadata, file, "", hex.EncodeToString(sum[:])); err != nil {
		t.Fatal(err)
	}
	r.index.SortEntries()
}

func (r *chartRepo) serve(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.authSeen = append(r.authSeen, req.Header.Get("Authorization"))
	r.mu.Unlock()
	if r.user != "" {
		if u, p, ok := req.BasicAuth(); !ok || u != r.user || p != r.password {
			w.Header().Set("WWW-Authenticate", `Basic realm="charts"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
	}
	name, ok := strings.CutPrefix(req.URL.Path, "/charts/")
	if !ok {
		http.NotFound(w, req)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if name == "index.yaml" {
		data, _ := yaml.Marshal(r.index)
		_, _ = w.Write(data)
		return
	}
	data, ok := r.archives[name]
	if !ok {
		http.NotFound(w, req)
		return
	}
	r.downloads.Add(1)
	_, _ = w.Write(data)
}

// pushOCI pushes the chart whose files are given to host/repo/<name>,
// plain HTTP, as `helm push` does.
func pushOCI(t testing.TB, host, repository string, files map[string]string) {
	t.Helper()
	data := packageFiles(t, files)
	ch, err := loader.LoadArchive(strings.NewReader(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := registry.NewClient(registry.ClientOptPlainHTTP(),
		registry.ClientOptCredentialsFile(filepath.Join(t.TempDir(), "creds.json")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Push(data, host+"/"+repository+"/"+ch.Name()+":"+ch.Metadata.Version); err != nil {
		t.Fatal(err)
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

package helm

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/cli"
	"helm.sh/helm/v3/pkg/downloader"
	"helm.sh/helm/v3/pkg/getter"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/internal/source"
	"github.com/devloop-dev/devloop/internal/testfiles"
	"github.com/devloop-dev/devloop/internal/testregistry"
	"github.com/devloop-dev/devloop/internal/testregistry/chartrepo"
)

// umbrellaSource lays out a source like Dynamo's platform chart: an
// umbrella chart at deploy/platform whose Chart.yaml lists nats from an
// HTTP chart repository (twice: once under an alias), etcd from an OCI
// registry and grove from a directory beside it (file://), each with a
// condition. It returns the source's root.
func umbrellaSource(t testing.TB, repoURL, ociHost string) string {
	t.Helper()
	root := t.TempDir()
	deps := `dependencies:
- name: nats
  version: ~1.2.0
  repository: ` + repoURL + `
  condition: nats.enabled
- name: nats
  alias: queue
  version: ~1.2.0
  repository: ` + repoURL + `
- name: etcd
  version: 0.3.x
  repository: oci://` + ociHost + `/charts
  condition: etcd.enabled
- name: grove
  version: 0.1.0
  repository: file://../components/grove
  condition: grove.enabled
`
	for p, c := range configMapChart("platform", "0.1.0", deps) {
		testfiles.Write(t, root, map[string]string{"deploy/platform/" + p: c})
	}
	testfiles.Write(t, root, map[string]string{"deploy/platform/values.yaml": "nats: {enabled: true}\netcd: {enabled: true}\ngrove: {enabled: true}\n"})
	for p, c := range configMapChart("grove", "0.1.0", "") {
		testfiles.Write(t, root, map[string]string{"deploy/components/grove/" + p: c})
	}
	return root
}

// depsFixture serves nats 1.1.0, 1.2.0, 1.2.3 and 1.3.0 from an HTTP chart
// repository and pushes etcd 0.3.1 and 0.4.0 to the real distribution
// registry.
func depsFixture(t *testing.T) (*chartrepo.Server, string) {
	t.Helper()
	host := testregistry.Start(t)
	r := chartrepo.Start(t)
	for _, v := range []string{"1.1.0", "1.2.0", "1.2.3", "1.3.0"} {
		r.AddFiles(t, configMapChart("nats", v, ""))
	}
	for _, v := range []string{"0.3.1", "0.4.0"} {
		chartrepo.PushOCI(t, chartrepo.PackageFiles(t, configMapChart("etcd", v, "")), host+"/charts")
	}
	return r, host
}

func sourceChart(path string) v1alpha1.ChartRef { return v1alpha1.ChartRef{Source: "app", Path: path} }

func plainHTTPTo(host string) LoadOptions {
	return LoadOptions{PlainHTTP: func(ref string) bool { return strings.HasPrefix(ref, "oci://"+host+"/") }}
}

// TestUmbrellaChartDependencies: a chart from a source whose dependencies
// are in a repository, an OCI registry and the source itself loads with
// each at the highest version its range allows; at install, Helm's own
// dependency processing drops the subchart whose condition the values turn
// off and renders the alias. Archives are cached: loading again downloads
// none.
func TestUmbrellaChartDependencies(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	r, host := depsFixture(t)
	root := umbrellaSource(t, r.URL, host)
	l := &ChartLoader{CacheDir: t.TempDir()}
	art := &source.Artifact{Dir: root}

	ch, err := l.Load(ctx, sourceChart("deploy/platform"), art, plainHTTPTo(host))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(subchartVersions(ch)).To(Equal([]string{"etcd@0.3.1", "grove@0.1.0", "nats@1.2.3"}),
		"nats once for both its names, each at the highest version its range allows")
	g.Expect(rendered(t, ch, map[string]any{"grove": map[string]any{"enabled": false}})).To(Equal(
		[]string{"rel-etcd", "rel-nats", "rel-platform", "rel-queue"}), "grove's condition is off; queue is nats under its alias")

	downloads := r.Downloads()
	g.Expect(downloads).To(Equal(int32(1)), "one nats archive for both names")
	ch, err = l.Load(ctx, sourceChart("deploy/platform"), art, plainHTTPTo(host))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Downloads()).To(Equal(downloads), "cached by URL and digest")
	g.Expect(rendered(t, ch, map[string]any{"nats": map[string]any{"enabled": false}, "etcd": map[string]any{"enabled": false}})).To(Equal(
		[]string{"rel-grove", "rel-platform", "rel-queue"}))
}

// A subchart shipped in charts/ at a version the range allows is used as
// it is; one the range does not allow is replaced, not rendered besides.
func TestVendoredDependencies(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	r := chartrepo.Start(t)
	r.AddFiles(t, configMapChart("nats", "1.2.3", ""))
	root := t.TempDir()
	deps := "dependencies:\n- name: nats\n  version: ~1.2.0\n  repository: " + r.URL + "\n"
	testfiles.Write(t, root, map[string]string{"chart/Chart.yaml": configMapChart("app", "0.1.0", deps)["Chart.yaml"]})

	testfiles.Write(t, root, map[string]string{"chart/charts/nats-1.2.0.tgz": string(chartrepo.PackageFiles(t, configMapChart("nats", "1.2.0", "")))})
	l := &ChartLoader{CacheDir: t.TempDir()}
	ch, err := l.Load(ctx, sourceChart("chart"), &source.Artifact{Dir: root}, LoadOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(subchartVersions(ch)).To(Equal([]string{"nats@1.2.0"}))
	g.Expect(r.Downloads()).To(BeZero(), "nothing downloaded for a vendored dependency")

	g.Expect(os.Remove(filepath.Join(root, "chart/charts/nats-1.2.0.tgz"))).To(Succeed())
	testfiles.Write(t, root, map[string]string{"chart/charts/nats-1.1.0.tgz": string(chartrepo.PackageFiles(t, configMapChart("nats", "1.1.0", "")))})
	ch, err = l.Load(ctx, sourceChart("chart"), &source.Artifact{Dir: root}, LoadOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(subchartVersions(ch)).To(Equal([]string{"nats@1.2.3"}), "the stale 1.1.0 is replaced")

	// With a Chart.lock, the locked version is the one: a vendored
	// archive the range allows but the lock does not is replaced.
	g.Expect(os.Remove(filepath.Join(root, "chart/charts/nats-1.1.0.tgz"))).To(Succeed())
	testfiles.Write(t, root, map[string]string{"chart/charts/nats-1.2.0.tgz": string(chartrepo.PackageFiles(t, configMapChart("nats", "1.2.0", "")))})
	ch, err = loader.Load(filepath.Join(root, "chart"))
	g.Expect(err).NotTo(HaveOccurred())
	lock := &chart.Lock{Dependencies: []*chart.Dependency{{Name: "nats", Repository: r.URL, Version: "1.2.3"}}}
	lock.Digest, err = digestJSON([2]any{ch.Metadata.Dependencies, lock.Dependencies})
	g.Expect(err).NotTo(HaveOccurred())
	writeLock(t, filepath.Join(root, "chart"), lock)
	ch, err = l.Load(ctx, sourceChart("chart"), &source.Artifact{Dir: root}, LoadOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(subchartVersions(ch)).To(Equal([]string{"nats@1.2.3"}), "the locked 1.2.3, not the vendored 1.2.0")
}

// TestChartLock: a Chart.lock written by Helm's own `helm dependency
// update` is in sync; a lock pins the version it names over the highest
// the range allows; a lock for other dependencies is refused, as `helm
// dependency build` refuses it.
func TestChartLock(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	r, host := depsFixture(t)
	root := umbrellaSource(t, r.URL, host)
	dir := filepath.Join(root, "deploy/platform")
	l := &ChartLoader{CacheDir: t.TempDir()}
	art := &source.Artifact{Dir: root}

	// helm dependency update, then the charts/ it filled removed, as
	// when only Chart.yaml and Chart.lock are committed.
	helmHome := t.TempDir()
	rc, err := l.registryClient(l.httpClient(), true, host, nil)
	g.Expect(err).NotTo(HaveOccurred())
	m := &downloader.Manager{Out: io.Discard, ChartPath: dir, RegistryClient: rc,
		Getters:          getter.All(&cli.EnvSettings{RepositoryConfig: filepath.Join(helmHome, "repositories.yaml"), RepositoryCache: helmHome}),
		RepositoryConfig: filepath.Join(helmHome, "repositories.yaml"), RepositoryCache: helmHome}
	g.Expect(m.Update()).To(Succeed())
	g.Expect(os.RemoveAll(filepath.Join(dir, "charts"))).To(Succeed())
	ch, err := l.Load(ctx, sourceChart("deploy/platform"), art, plainHTTPTo(host))
	g.Expect(err).NotTo(HaveOccurred(), "Helm's lock digest is ours")
	g.Expect(ch.Lock).NotTo(BeNil())
	g.Expect(subchartVersions(ch)).To(Equal([]string{"etcd@0.3.1", "grove@0.1.0", "nats@1.2.3"}))

	// A lock pinning nats 1.2.0 and etcd 0.3.1, its digest computed as
	// Helm's (the lock above proves the computation).
	ch, err = loader.Load(dir)
	g.Expect(err).NotTo(HaveOccurred())
	lock := ch.Lock
	for _, d := range lock.Dependencies {
		if d.Name == "nats" {
			d.Version = "1.2.0"
		}
	}
	lock.Digest, err = digestJSON([2]any{ch.Metadata.Dependencies, lock.Dependencies})
	g.Expect(err).NotTo(HaveOccurred())
	writeLock(t, dir, lock)
	ch, err = l.Load(ctx, sourceChart("deploy/platform"), art, plainHTTPTo(host))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(subchartVersions(ch)).To(Equal([]string{"etcd@0.3.1", "grove@0.1.0", "nats@1.2.0"}), "the locked version, not the highest")

	// Chart.yaml changed after locking.
	chartYAML, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	testfiles.Write(t, dir, map[string]string{"Chart.yaml": strings.Replace(string(chartYAML), "0.3.x", "0.4.x", 1)})
	_, err = l.Load(ctx, sourceChart("deploy/platform"), art, plainHTTPTo(host))
	g.Expect(fault.IsPermanent(err)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("chart platform: Chart.lock is out of sync with the dependencies in Chart.yaml"))
}

// TestDependencyErrors: what cannot be resolved is a permanent error
// naming the dependency, its repository and version, and why.
func TestDependencyErrors(t *testing.T) {
	r := chartrepo.Start(t)
	r.AddFiles(t, configMapChart("nats", "1.1.0", ""))
	outside := testfiles.Tree(t, configMapChart("secret", "0.1.0", ""))

	cases := []struct {
		name string
		deps string
		// setup adds files to the source (root) beside the chart (root/chart).
		setup func(t *testing.T, root string)
		want  []string
	}{
		{name: "no version matches",
			deps: "- name: nats\n  version: ~1.2.0\n  repository: " + r.URL,
			want: []string{`dependency "nats" (` + r.URL + `, version ~1.2.0): no version matches "~1.2.0" (the index has 1.1.0)`}},
		{name: "not in the repository",
			deps: "- name: stan\n  version: 1.x\n  repository: " + r.URL,
			want: []string{`dependency "stan" (` + r.URL + `, version 1.x): no chart "stan" in the repository's index`}},
		{name: "repository down",
			deps: "- name: nats\n  version: 1.x\n  repository: http://127.0.0.1:1/charts",
			want: []string{`dependency "nats" (http://127.0.0.1:1/charts, version 1.x): index: `}},
		{name: "file:// leaving the source",
			deps: "- name: secret\n  version: 0.1.0\n  repository: file://../../../../../../../.." + outside,
			want: []string{`dependency "secret" (file://../../`, `leaves the source`}},
		{name: "absolute file://",
			deps: "- name: secret\n  version: 0.1.0\n  repository: file://" + outside,
			want: []string{`dependency "secret"`, `leaves the source`}},
		{name: "file:// through a symbolic link out of the source",
			deps: "- name: secret\n  version: 0.1.0\n  repository: file://../link",
			setup: func(t *testing.T, root string) {
				if err := os.Symlink(outside, filepath.Join(root, "link")); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{`dependency "secret" (file://../link, version 0.1.0): the directory leaves the source (through a symbolic link)`}},
		{name: "file:// not there",
			deps: "- name: grove\n  version: 0.1.0\n  repository: file://../grove",
			want: []string{`dependency "grove" (file://../grove, version 0.1.0): no such directory in the source`}},
		{name: "file:// of another version",
			deps: "- name: grove\n  version: 0.2.x\n  repository: file://../grove",
			setup: func(t *testing.T, root string) {
				testfiles.Write(t, filepath.Join(root, "grove"), configMapChart("grove", "0.1.0", ""))
			},
			want: []string{`the directory holds version 0.1.0, which "0.2.x" does not allow`}},
		{name: "repository by name",
			deps: "- name: nats\n  version: 1.x\n  repository: \"@nats\"",
			want: []string{`dependency "nats" (@nats, version 1.x): "@nats" names a repository added with ` + "`helm repo add`"}},
		{name: "no repository, not in charts/",
			deps: "- name: nats\n  version: 1.x",
			want: []string{`dependency "nats" (version 1.x): not in charts/, and Chart.yaml names no repository for it`}},
		{name: "unknown scheme",
			deps: "- name: nats\n  version: 1.x\n  repository: ftp://example.invalid/charts",
			want: []string{`want an https://, http://, oci:// or file:// URL`}},
		{name: "a chart that depends on itself stops at the depth bound",
			deps: "- name: app\n  version: 0.1.0\n  repository: file://.",
			want: []string{`dependencies nested deeper than 5 charts`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			root := t.TempDir()
			testfiles.Write(t, filepath.Join(root, "chart"), configMapChart("app", "0.1.0", "dependencies:\n"+tc.deps+"\n"))
			if tc.setup != nil {
				tc.setup(t, root)
			}
			l := &ChartLoader{CacheDir: t.TempDir()}
			_, err := l.Load(context.Background(), sourceChart("chart"), &source.Artifact{Dir: root}, LoadOptions{})
			g.Expect(err).To(HaveOccurred())
			t.Log(err)
			g.Expect(fault.IsPermanent(err) || fault.IsUnavailable(err)).To(BeTrue(), "%v", err)
			for _, w := range tc.want {
				g.Expect(err.Error()).To(ContainSubstring(w))
			}
			g.Expect(len(err.Error())).To(BeNumerically("<", 400), "bounded: %s", err)
		})
	}
}

// TestPackagedChartDependencies: an OCI chart or a repository chart whose
// package lacks charts/ gets its dependencies like a source chart, except
// file:// ones, which a package must ship.
func TestPackagedChartDependencies(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	r, host := depsFixture(t)
	deps := "dependencies:\n- name: nats\n  version: 1.2.x\n  repository: " + r.URL + "\n- name: etcd\n  version: 0.4.0\n  repository: oci://" + host + "/charts\n"
	chartrepo.PushOCI(t, chartrepo.PackageFiles(t, configMapChart("platform", "1.0.0", deps)), host+"/apps")
	r.AddFiles(t, configMapChart("platform", "1.0.0", deps))
	l := &ChartLoader{CacheDir: t.TempDir()}

	for _, ref := range []v1alpha1.ChartRef{
		{OCI: "oci://" + host + "/apps/platform", Version: "1.0.0"},
		{Repo: r.URL, Name: "platform", Version: "1.x"},
	} {
		ch, err := l.Load(ctx, ref, nil, plainHTTPTo(host))
		g.Expect(err).NotTo(HaveOccurred(), "%+v", ref)
		g.Expect(subchartVersions(ch)).To(Equal([]string{"etcd@0.4.0", "nats@1.2.3"}))
	}

	chartrepo.PushOCI(t, chartrepo.PackageFiles(t, configMapChart("local", "1.0.0", "dependencies:\n- name: grove\n  version: 0.1.0\n  repository: file://../grove\n")), host+"/apps")
	_, err := l.Load(ctx, v1alpha1.ChartRef{OCI: "oci://" + host + "/apps/local"}, nil, plainHTTPTo(host))
	g.Expect(fault.IsPermanent(err)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring(`dependency "grove" (file://../grove, version 0.1.0): a file:// dependency of a packaged chart: the package must ship it in charts/`))

	// Plain HTTP to a registry only where the options allow it.
	_, err = l.Load(ctx, v1alpha1.ChartRef{Repo: r.URL, Name: "platform"}, nil, LoadOptions{})
	g.Expect(err).To(MatchError(ContainSubstring(`dependency "etcd" (oci://` + host + `/charts, version 0.4.0)`)))
}

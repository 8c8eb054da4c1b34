package helm

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/repo"

	"github.com/devloop-dev/devloop/internal/fault"
)

// Bounds on what one chart's dependencies may pull in: how deep
// dependencies of dependencies go, and how many archives are downloaded.
const (
	maxDependencyDepth   = 5
	maxDependencyFetches = 32
)

// resolveDependencies adds to ch the dependencies its Chart.yaml lists
// and its charts/ directory lacks, as `helm dependency build` does: from
// an HTTP(S) chart repository, an OCI registry (oci://) or a directory of
// the source (file://), at the version Chart.lock pins when there is one
// (its digest checked as Helm checks it), else the highest the range
// allows. A dependency in charts/ that the version allows is used as it is.
// Every download goes through the loader's egress-checked client with its
// timeout and size caps, and archives are cached by URL and digest.
//
// The same applies to the dependencies of each subchart, to a bounded
// depth: a packaged subchart normally ships its own. alias, condition and
// tags are Helm's business at install (chartutil.ProcessDependencies),
// with one exception: a dependency of the top chart that the release's
// values turn off (opts.Values) is not fetched, where Helm's CLI wants
// every dependency present, enabled or not (chart_deps_enabled.go).
//
// root is the source's directory, which file:// dependencies may not
// leave, and dir the chart's own; both are empty for a chart that came as
// an archive.
func (l *ChartLoader) resolveDependencies(ctx context.Context, ch *chart.Chart, root, dir string, opts LoadOptions) error {
	r := &depResolver{l: l, opts: opts, root: root, indexes: map[string]repoIndex{}}
	return r.resolve(ctx, ch, dir, nil)
}

type depResolver struct {
	l       *ChartLoader
	opts    LoadOptions
	root    string
	fetches int
	// indexes are the repositories' indexes, each downloaded once per load.
	indexes map[string]repoIndex
}

type repoIndex struct {
	base *url.URL
	idx  *repo.IndexFile
}

// resolve completes ch, whose directory is dir ("" for an archive), and
// then its subcharts; path names ch's place under the top chart.
func (r *depResolver) resolve(ctx context.Context, ch *chart.Chart, dir string, path []string) error {
	if len(path) > maxDependencyDepth {
		return fault.Permanentf("dependency %s: dependencies nested deeper than %d charts", quotePath(path), maxDependencyDepth)
	}
	versions, err := lockedVersions(ch)
	if err != nil {
		return inPath(path, err)
	}
	// What each dependency may be: the locked version, or Chart.yaml's
	// range (always for file://, whose lock entry Helm does not use).
	wanted := make([]string, len(ch.Metadata.Dependencies))
	for i, req := range ch.Metadata.Dependencies {
		if req == nil {
			continue
		}
		wanted[i] = req.Version
		if versions != nil && !strings.HasPrefix(req.Repository, "file://") {
			wanted[i] = versions[i]
		}
	}
	// The directories of file:// subcharts, for their own file://
	// dependencies; the others came as archives or from charts/.
	dirs := map[*chart.Chart]string{}
	// The values are read only when a dependency is missing (a chart
	// that ships its subcharts in charts/ composes none on each load),
	// and only for the top chart's.
	var off offDependencies
	decided := len(path) > 0
	for i, req := range ch.Metadata.Dependencies {
		if req == nil || subchartFor(ch.Dependencies(), req.Name, wanted[i]) != nil {
			continue
		}
		if !decided {
			off, decided = r.offDependencies(ch), true
		}
		if off.turnedOff(req) {
			continue
		}
		sub, subDir, err := r.fetch(ctx, req, wanted[i], dir)
		if err != nil {
			return fmt.Errorf("%s: %w%s", describeDependency(path, req, wanted[i]), err, off.hint(req))
		}
		dropStale(ch, req.Name, wanted)
		ch.AddDependency(sub)
		dirs[sub] = subDir
	}
	for _, sub := range ch.Dependencies() {
		if err := r.resolve(ctx, sub, dirs[sub], append(path[:len(path):len(path)], sub.Name())); err != nil {
			return err
		}
	}
	return nil
}

// subchartFor is the subchart among subs named name whose version the
// constraint allows, as Helm matches them at install; nil if none. Helm
// refuses a dependency without a version, but a subchart shipped in
// charts/ under its name is taken as it is.
func subchartFor(subs []*chart.Chart, name, constraint string) *chart.Chart {
	for _, s := range subs {
		if s.Name() == name && (constraint == "" || chartutil.IsCompatibleRange(constraint, s.Metadata.Version)) {
			return s
		}
	}
	return nil
}

// dropStale removes subcharts named name that no dependency of that name
// wants (wanted is each dependency's locked version or range): a stale
// archive in charts/, which `helm dependency build` replaces and Helm
// would otherwise render instead of, or besides, the right one.
func dropStale(ch *chart.Chart, name string, wanted []string) {
	var keep []*chart.Chart
	for _, s := range ch.Dependencies() {
		stale := s.Name() == name
		for i, req := range ch.Metadata.Dependencies {
			if req != nil && req.Name == name && subchartFor([]*chart.Chart{s}, name, wanted[i]) != nil {
				stale = false
			}
		}
		if !stale {
			keep = append(keep, s)
		}
	}
	ch.SetDependencies(keep...)
}

// fetch gets the chart req names at version; dir is the directory of the
// chart that lists it. For a file:// dependency it also returns the
// subchart's directory.
func (r *depResolver) fetch(ctx context.Context, req *chart.Dependency, version, dir string) (*chart.Chart, string, error) {
	repository := req.Repository
	switch {
	case repository == "":
		return nil, "", fault.Permanentf("not in charts/, and Chart.yaml names no repository for it")
	case strings.HasPrefix(repository, "@"), strings.HasPrefix(repository, "alias:"):
		return nil, "", fault.Permanentf("%q names a repository added with `helm repo add`, which devloop has no list of: write the repository's URL in Chart.yaml", repository)
	case strings.HasPrefix(repository, "file://"):
		return r.local(req, dir)
	}
	if version == "" {
		return nil, "", fault.Permanentf("Chart.yaml gives no version (helm dependency build refuses it too)")
	}
	if r.fetches++; r.fetches > maxDependencyFetches {
		return nil, "", fault.Permanentf("the chart's dependencies need more than %d downloads", maxDependencyFetches)
	}
	switch {
	case strings.HasPrefix(repository, "oci://"):
		ref := strings.TrimSuffix(repository, "/") + "/" + req.Name
		ch, err := r.l.fetchOCI(ctx, ref, version, r.opts.plainHTTP(ref), r.opts.Credentials)
		return ch, "", err
	case strings.HasPrefix(repository, "https://"), strings.HasPrefix(repository, "http://"):
		ctx, cancel := context.WithTimeout(ctx, r.l.timeout())
		defer cancel()
		ri, ok := r.indexes[repository]
		if !ok {
			base, idx, err := r.l.repoIndex(ctx, repository, r.opts.Credentials)
			if err != nil {
				return nil, "", err
			}
			ri = repoIndex{base, idx}
			r.indexes[repository] = ri
		}
		ch, err := r.l.repoChart(ctx, ri.base, ri.idx, req.Name, version, r.opts.Credentials)
		return ch, "", err
	}
	return nil, "", fault.Permanentf("repository %q: want an https://, http://, oci:// or file:// URL", repository)
}

// local loads a file:// dependency: a directory relative to dir that
// stays inside the source, symbolic links followed.
func (r *depResolver) local(req *chart.Dependency, dir string) (*chart.Chart, string, error) {
	if dir == "" || r.root == "" {
		return nil, "", fault.Permanentf("a file:// dependency of a packaged chart: the package must ship it in charts/")
	}
	rel := strings.TrimPrefix(req.Repository, "file://")
	target := filepath.Join(dir, filepath.FromSlash(rel))
	if filepath.IsAbs(filepath.FromSlash(rel)) || !inside(r.root, target) {
		return nil, "", fault.Permanentf("the directory leaves the source")
	}
	real, err := filepath.EvalSymlinks(target)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, "", fault.Permanentf("no such directory in the source")
		}
		return nil, "", fault.Permanent(err)
	}
	if realRoot, err := filepath.EvalSymlinks(r.root); err != nil || !inside(realRoot, real) {
		return nil, "", fault.Permanentf("the directory leaves the source (through a symbolic link)")
	}
	ch, err := loader.LoadDir(real)
	if err != nil {
		return nil, "", fault.Permanent(err)
	}
	if ch.Name() != req.Name {
		return nil, "", fault.Permanentf("the directory holds chart %q, not %q", ch.Name(), req.Name)
	}
	if req.Version != "" && !chartutil.IsCompatibleRange(req.Version, ch.Metadata.Version) {
		return nil, "", fault.Permanentf("the directory holds version %s, which %q does not allow", ch.Metadata.Version, req.Version)
	}
	return ch, real, nil
}

// describeDependency names a dependency for messages: its place under
// the top chart, its chart when aliased, its repository and version.
func describeDependency(path []string, req *chart.Dependency, version string) string {
	name := req.Name
	var details []string
	if req.Alias != "" {
		name = req.Alias
		details = append(details, "chart "+req.Name)
	}
	if req.Repository != "" {
		details = append(details, req.Repository)
	}
	if version != "" {
		details = append(details, "version "+version)
	}
	return fmt.Sprintf("dependency %s (%s)", quotePath(append(path[:len(path):len(path)], name)), strings.Join(details, ", "))
}

// quotePath is a subchart's place, e.g. "platform" > "nats".
func quotePath(path []string) string {
	q := make([]string, len(path))
	for i, p := range path {
		q[i] = fmt.Sprintf("%q", p)
	}
	return strings.Join(q, " > ")
}

// inPath prefixes an error about a subchart with where it is.
func inPath(path []string, err error) error {
	if len(path) == 0 {
		return err
	}
	return fmt.Errorf("subchart %s: %w", quotePath(path), err)
}

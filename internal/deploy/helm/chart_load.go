package helm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/registry"
	"helm.sh/helm/v3/pkg/repo"
	"oras.land/oras-go/v2/registry/remote/auth"
	"sigs.k8s.io/yaml"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/egress"
	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/internal/source"
)

// Chart is a loaded chart with its dependencies, as a ReleaseRequest
// installs it. It is Helm's type under this package's name: the deploy
// engine hands it from ChartLoader.Load to ChartFileReader and the
// request without looking inside, and imports no Helm package to do so.
type Chart = chart.Chart

// Defaults for zero ChartLoader fields.
const (
	DefaultChartTimeout = time.Minute
	DefaultMaxIndexSize = 16 << 20
	DefaultMaxChartSize = 32 << 20
)

// ChartLoader loads charts from a fetched source, an OCI registry or an
// HTTP chart repository. Downloaded archives are cached in CacheDir by URL
// and digest, so a chart version is downloaded once. Repository and
// registry URLs are tenant input: every download has a timeout and a size
// cap, and no credentials of the operator's environment are used.
type ChartLoader struct {
	// CacheDir holds downloaded chart archives; required for oci and repo.
	CacheDir string
	// HTTP is the client for chart repositories and registries.
	HTTP *http.Client
	// Egress is the policy every connection to a chart repository or
	// registry is checked against (see internal/egress), when HTTP is nil.
	Egress *egress.Policy
	// Timeout bounds each download; MaxIndexSize and MaxChartSize cap a
	// repository index and a chart archive, in bytes.
	Timeout      time.Duration
	MaxIndexSize int64
	MaxChartSize int64
}

// LoadOptions are what the downloads of one environment's chart may use.
type LoadOptions struct {
	// PlainHTTP says whether an oci:// reference may be pulled over plain
	// HTTP; nil allows it nowhere.
	PlainHTTP func(ociRef string) bool
	// Credentials are the environment's spec.chartCredentials; nil uses
	// none.
	Credentials *ChartCredentials
	// Values are the values the release will be installed with, given the
	// top chart before its dependencies are added (values files may come
	// from it). A dependency of the top chart that they turn off (its
	// condition or tags, as Helm decides at install) is not fetched: an
	// umbrella chart installs with a disabled subchart from a repository
	// this cluster cannot reach. nil fetches every dependency, as `helm
	// dependency build` does.
	Values func(ch *chart.Chart) (map[string]any, error)
}

func (o LoadOptions) plainHTTP(ociRef string) bool {
	return o.PlainHTTP != nil && o.PlainHTTP(ociRef)
}

// Load loads the chart ref names, with the dependencies its Chart.yaml
// lists and its charts/ directory lacks (see resolveDependencies). art is
// the fetched source of a source chart (nil otherwise).
func (l *ChartLoader) Load(ctx context.Context, ref v1alpha1.ChartRef, art *source.Artifact, opts LoadOptions) (*chart.Chart, error) {
	var (
		ch   *chart.Chart
		dir  string
		root string
		err  error
	)
	switch {
	case ref.Source != "":
		if art == nil {
			return nil, fmt.Errorf("chart: source %q has not been fetched", ref.Source)
		}
		root = art.Dir
		ch, dir, err = loadChartDir(art.Dir, ref.Path)
	case ref.OCI != "":
		ch, err = l.fetchOCI(ctx, ref.OCI, ref.Version, opts.plainHTTP(ref.OCI), opts.Credentials)
	case ref.Repo != "":
		ch, err = l.fetchRepo(ctx, ref.Repo, ref.Name, ref.Version, opts.Credentials)
		if err != nil {
			err = fmt.Errorf("chart repository %s: chart %s: %w", ref.Repo, ref.Name, err)
		}
	default:
		return nil, fault.Permanentf("chart: none of source, oci or repo is set")
	}
	if err != nil {
		return nil, err
	}
	if err := l.resolveDependencies(ctx, ch, root, dir, opts); err != nil {
		return nil, err
	}
	return ch, nil
}

// LoadChartDir loads the chart at path inside a fetched source directory
// as it is: dependencies its charts/ directory lacks are not resolved.
func LoadChartDir(root, path string) (*chart.Chart, error) {
	ch, _, err := loadChartDir(root, path)
	return ch, err
}

// loadChartDir loads the chart at path inside root and returns its
// directory.
func loadChartDir(root, path string) (*chart.Chart, string, error) {
	dir := filepath.Join(root, filepath.FromSlash(path))
	if !inside(root, dir) {
		return nil, "", fault.Permanentf("chart path %q leaves the source", path)
	}
	if _, err := os.Stat(dir); err != nil {
		return nil, "", fault.Permanentf("chart path %q: not found in the source", path)
	}
	ch, err := loader.Load(dir)
	if err != nil {
		return nil, "", fault.Permanentf("chart %q: %w", path, err)
	}
	return ch, dir, nil
}

// inside says whether path is root or under it, lexically.
func inside(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// LoadOCI pulls oci://host/repo/chart at version, an exact tag or a semver
// constraint (the highest version when empty), with no credentials and
// without resolving its dependencies.
func (l *ChartLoader) LoadOCI(ctx context.Context, ociRef, version string, plainHTTP bool) (*chart.Chart, error) {
	return l.fetchOCI(ctx, ociRef, version, plainHTTP, nil)
}

// fetchOCI is LoadOCI with the credentials creds has for ociRef.
func (l *ChartLoader) fetchOCI(ctx context.Context, ociRef, version string, plainHTTP bool, creds *ChartCredentials) (*chart.Chart, error) {
	ctx, cancel := context.WithTimeout(ctx, l.timeout())
	defer cancel()
	cred, err := creds.For(ctx, ociRef)
	if err != nil {
		return nil, err
	}
	// Every response (tag lists, manifests, the chart's layers) is capped
	// while it is read: Helm's client reads the layers whole.
	hc, capped := capClient(l.httpClient(), l.maxChart())
	rc, err := l.registryClient(hc, plainHTTP, urlHost(ociRef), cred)
	if err != nil {
		return nil, err
	}
	tooLarge := func(err error) error {
		if capped.exceeded.Load() {
			return fault.Permanentf("chart %s: a response of the registry is larger than %d bytes, the operator's limit for a chart", ociRef, l.maxChart())
		}
		return err
	}
	ref := strings.TrimPrefix(ociRef, "oci://")
	tag := version
	if tag == "" || !isExactVersion(tag) {
		tags, err := withContext(ctx, func() ([]string, error) { return rc.Tags(ref) })
		if err != nil {
			return nil, tooLarge(classifyFetch(fmt.Errorf("chart %s: listing tags: %w", ociRef, err)))
		}
		if tag, err = registry.GetTagMatchingVersionOrConstraint(tags, version); err != nil {
			return nil, fault.Permanentf("chart %s: %w", ociRef, noVersion(version, "the registry has tags", tags))
		}
	}
	// OCI tags cannot hold '+'; Helm pushes semver build metadata as '_'.
	full := ref + ":" + strings.ReplaceAll(tag, "+", "_")
	desc, err := withContext(ctx, func() (struct{ d string }, error) {
		d, err := rc.Resolve(full)
		return struct{ d string }{d.Digest.String()}, err
	})
	if err != nil {
		return nil, tooLarge(classifyFetch(fmt.Errorf("chart %s: resolving %s: %w", ociRef, tag, err)))
	}
	return l.cached(ociRef, ociRef, desc.d, func() ([]byte, error) {
		res, err := withContext(ctx, func() (*registry.PullResult, error) { return rc.Pull(full) })
		if err != nil {
			return nil, tooLarge(classifyFetch(fmt.Errorf("chart %s: pulling %s: %w", ociRef, tag, err)))
		}
		if int64(len(res.Chart.Data)) > l.maxChart() {
			return nil, fault.Permanentf("chart %s: archive larger than %d bytes", ociRef, l.maxChart())
		}
		return res.Chart.Data, nil
	})
}

// registryClient never reads the operator's Helm or Docker credentials:
// the authorizer has only cred, for host alone, and the credentials file
// lives in the cache.
func (l *ChartLoader) registryClient(hc *http.Client, plainHTTP bool, host string, cred *chartAuth) (*registry.Client, error) {
	authorizer := auth.Client{Client: hc, Cache: auth.NewCache()}
	if cred != nil {
		authorizer.Credential = auth.StaticCredential(host, auth.Credential{Username: cred.Username, Password: cred.Password})
	}
	opts := []registry.ClientOption{
		registry.ClientOptHTTPClient(hc),
		registry.ClientOptAuthorizer(authorizer),
		registry.ClientOptCredentialsFile(filepath.Join(l.CacheDir, "registry-credentials.json")),
		registry.ClientOptWriter(io.Discard),
	}
	if plainHTTP {
		opts = append(opts, registry.ClientOptPlainHTTP())
	}
	return registry.NewClient(opts...)
}

// LoadRepo loads chart name at version (exact or a semver constraint, the
// highest when empty) from the HTTP chart repository at repoURL, with no
// credentials and without resolving its dependencies. The archive's
// digest is verified against the index when the index has one.
func (l *ChartLoader) LoadRepo(ctx context.Context, repoURL, name, version string) (*chart.Chart, error) {
	ch, err := l.fetchRepo(ctx, repoURL, name, version, nil)
	if err != nil {
		return nil, fmt.Errorf("chart repository %s: chart %s: %w", repoURL, name, err)
	}
	return ch, nil
}

// fetchRepo is LoadRepo with creds for each request whose URL they match.
// Its errors do not name the repository: the caller does.
func (l *ChartLoader) fetchRepo(ctx context.Context, repoURL, name, version string, creds *ChartCredentials) (*chart.Chart, error) {
	ctx, cancel := context.WithTimeout(ctx, l.timeout())
	defer cancel()
	base, idx, err := l.repoIndex(ctx, repoURL, creds)
	if err != nil {
		return nil, err
	}
	return l.repoChart(ctx, base, idx, name, version, creds)
}

// repoIndex downloads and parses the index of the repository at repoURL.
// It is downloaded on every load, with the tenant's credentials: that is
// what checks the tenant's access before a cached archive is served.
func (l *ChartLoader) repoIndex(ctx context.Context, repoURL string, creds *ChartCredentials) (*url.URL, *repo.IndexFile, error) {
	base, err := url.Parse(strings.TrimSuffix(repoURL, "/") + "/")
	if err != nil {
		return nil, nil, fault.Permanentf("repository URL: %w", err)
	}
	indexURL := base.JoinPath("index.yaml").String()
	// The credentials are looked up before the request as well, so a
	// missing Secret is reported as such, not as a failed GET.
	if _, err := creds.For(ctx, indexURL); err != nil {
		return nil, nil, err
	}
	data, err := l.download(ctx, withCredentials(l.httpClient(), creds), indexURL, l.maxIndex())
	if err != nil {
		return nil, nil, fmt.Errorf("index: %w", err)
	}
	idx := repo.NewIndexFile()
	if err := yaml.Unmarshal(data, idx); err != nil {
		return nil, nil, fault.Permanentf("index.yaml: %w", err)
	}
	idx.SortEntries()
	return base, idx, nil
}

// repoChart downloads chart name at version as idx lists it.
func (l *ChartLoader) repoChart(ctx context.Context, base *url.URL, idx *repo.IndexFile, name, version string, creds *ChartCredentials) (*chart.Chart, error) {
	if len(idx.Entries[name]) == 0 {
		return nil, fault.Permanentf("no chart %q in the repository's index", name)
	}
	cv, err := idx.Get(name, version)
	if err != nil {
		have := make([]string, 0, len(idx.Entries[name]))
		for _, v := range idx.Entries[name] {
			have = append(have, v.Version)
		}
		return nil, fault.Permanent(noVersion(version, "the index has", have))
	}
	if len(cv.URLs) == 0 {
		return nil, fault.Permanentf("version %s has no URL in the index", cv.Version)
	}
	u, err := base.Parse(cv.URLs[0])
	if err != nil {
		return nil, fault.Permanentf("version %s: %w", cv.Version, err)
	}
	want := strings.TrimPrefix(cv.Digest, "sha256:")
	return l.cached(base.String(), u.String(), want, func() ([]byte, error) {
		data, err := l.download(ctx, withCredentials(l.httpClient(), creds), u.String(), l.maxChart())
		if err != nil {
			return nil, fmt.Errorf("version %s: %w", cv.Version, err)
		}
		if got := sha256.Sum256(data); want != "" && hex.EncodeToString(got[:]) != want {
			return nil, fault.Permanentf("version %s from %s: digest sha256:%x does not match the index's sha256:%s", cv.Version, u.Redacted(), got, want)
		}
		return data, nil
	})
}

// noVersion says no version matches constraint, with the first few
// versions there are (newest first, as indexes and tag lists are sorted).
func noVersion(constraint, there string, versions []string) error {
	const shown = 5
	list := strings.Join(versions[:min(len(versions), shown)], ", ")
	if len(versions) > shown {
		list += fmt.Sprintf(" and %d more", len(versions)-shown)
	}
	if list == "" {
		list = "none"
	}
	if constraint == "" {
		constraint = "latest"
	}
	return fmt.Errorf("no version matches %q (%s %s)", constraint, there, list)
}

func loadArchive(from string, data []byte) (*chart.Chart, error) {
	ch, err := loader.LoadArchive(bytes.NewReader(data))
	if err != nil {
		return nil, fault.Permanentf("chart from %s: %w", from, err)
	}
	return ch, nil
}

// download GETs u with hc, failing when the body exceeds max bytes.
func (l *ChartLoader) download(ctx context.Context, hc *http.Client, u string, max int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fault.Permanent(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, classifyFetch(err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
		return nil, fault.Unavailablef("GET %s: %s", u, resp.Status)
	case resp.StatusCode != http.StatusOK:
		return nil, fault.Permanentf("GET %s: %s", u, resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, classifyFetch(fmt.Errorf("GET %s: %w", u, err))
	}
	if int64(len(data)) > max {
		return nil, fault.Permanentf("GET %s: larger than %d bytes", u, max)
	}
	return data, nil
}

// classifyFetch marks network failures Unavailable; other errors are left
// to the caller's backoff.
func classifyFetch(err error) error {
	if fault.IsPermanent(err) {
		// An egress refusal or a credentials Secret that is missing:
		// the client wraps it as a url.Error, which is a net.Error.
		return err
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "connection refused") {
		return fault.Unavailable(err)
	}
	return err
}

// withContext runs f, which cannot be cancelled (Helm's registry client
// takes no context), and stops waiting for it when ctx ends.
func withContext[T any](ctx context.Context, f func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// isExactVersion reports whether v is a plain version rather than a
// constraint: it then names a tag directly.
func isExactVersion(v string) bool {
	return !strings.ContainsAny(v, "<>=~^*|, xX")
}

func (l *ChartLoader) timeout() time.Duration {
	if l.Timeout > 0 {
		return l.Timeout
	}
	return DefaultChartTimeout
}

func (l *ChartLoader) maxIndex() int64 {
	if l.MaxIndexSize > 0 {
		return l.MaxIndexSize
	}
	return DefaultMaxIndexSize
}

func (l *ChartLoader) maxChart() int64 {
	if l.MaxChartSize > 0 {
		return l.MaxChartSize
	}
	return DefaultMaxChartSize
}

func (l *ChartLoader) httpClient() *http.Client {
	if l.HTTP != nil {
		return l.HTTP
	}
	return l.Egress.Client(l.timeout())
}

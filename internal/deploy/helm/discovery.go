package helm

import (
	"sync"
	"sync/atomic"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// Helm asks the API server what it serves before every action: the
// server version and every API group (its Capabilities, read anew each
// time), and builds a REST mapper over a fresh discovery client. With a
// configuration made per action, that was discovery on every install and
// upgrade. So discovery, the REST mapper and the Capabilities are kept per
// identity (API server and impersonated user: what one user may discover
// is not another's) and shared by that identity's actions. They are
// dropped when they may be wrong:
//   - a kind is not found (a CRD installed since): the next lookup
//     discovers again, once per minDiscoveryRefresh at most;
//   - Helm installs CRDs (it invalidates the discovery client, and so
//     this cache);
//   - devloop applies a CRD (Releases.CRDApplied), whoever deploys next
//     sees it;
//   - capabilitiesTTL has passed, for CRDs someone else installs, which
//     a chart may test with .Capabilities.APIVersions.Has.

// capabilitiesTTL bounds how old the Capabilities a chart renders with
// may be when nothing said they changed.
const capabilitiesTTL = time.Minute

// minDiscoveryRefresh rate-limits discovery on kinds that stay missing.
const minDiscoveryRefresh = 5 * time.Second

// identityDiscovery is one identity's discovery, mapper and Capabilities.
type identityDiscovery struct {
	discovery *invalidatingDiscovery
	mapper    *restmapper.DeferredDiscoveryRESTMapper
	// crdsApplied is its operator's count (Releases.crdsApplied).
	crdsApplied *atomic.Int64

	mu          sync.Mutex
	caps        *chartutil.Capabilities
	capsAt      time.Time
	crds        int64
	lastRefresh time.Time
}

// discoveries are an operator's identity discoveries, by API server and
// user (Releases.discoveries).
type discoveries struct {
	mu sync.Mutex
	m  map[string]*identityDiscovery
}

// discoveryFor is r's cached discovery of cfg's identity, made on first
// use.
func (r *Releases) discoveryFor(cfg *rest.Config) (*identityDiscovery, error) {
	key := cfg.Host + "\x00" + cfg.Impersonate.UserName
	r.discoveries.mu.Lock()
	defer r.discoveries.mu.Unlock()
	if d := r.discoveries.m[key]; d != nil {
		return d, nil
	}
	c := rest.CopyConfig(cfg)
	// Discovery of a cluster with many CRDs makes many requests at once.
	c.QPS, c.Burst = 50, 100
	dc, err := discovery.NewDiscoveryClientForConfig(c)
	if err != nil {
		return nil, err
	}
	d := &identityDiscovery{crdsApplied: &r.crdsApplied, crds: r.crdsApplied.Load()}
	d.discovery = &invalidatingDiscovery{CachedDiscoveryInterface: memory.NewMemCacheClient(dc), onInvalidate: d.dropCapabilities}
	d.mapper = restmapper.NewDeferredDiscoveryRESTMapper(d.discovery)
	r.discoveries.m[key] = d
	return d, nil
}

// fresh drops what devloop's own CRD applies made stale.
func (d *identityDiscovery) fresh() {
	n := d.crdsApplied.Load()
	d.mu.Lock()
	stale := d.crds != n
	d.crds = n
	d.mu.Unlock()
	if stale {
		d.refresh()
	}
}

// refresh forgets what was discovered.
func (d *identityDiscovery) refresh() {
	d.discovery.Invalidate() // drops the Capabilities too
	d.mapper.Reset()
}

// refreshForMissingKind refreshes unless it did so very recently, and
// says whether it did.
func (d *identityDiscovery) refreshForMissingKind() bool {
	d.mu.Lock()
	if time.Since(d.lastRefresh) < minDiscoveryRefresh {
		d.mu.Unlock()
		return false
	}
	d.lastRefresh = time.Now()
	d.mu.Unlock()
	d.refresh()
	return true
}

func (d *identityDiscovery) dropCapabilities() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.caps = nil
}

// capabilities are Helm's Capabilities for this identity, as Helm's
// getCapabilities computes them, discovered again after capabilitiesTTL
// or an invalidation.
func (d *identityDiscovery) capabilities() (*chartutil.Capabilities, error) {
	d.mu.Lock()
	if d.caps != nil && time.Since(d.capsAt) < capabilitiesTTL {
		defer d.mu.Unlock()
		return d.caps, nil
	}
	d.mu.Unlock()
	d.discovery.Invalidate()
	version, err := d.discovery.ServerVersion()
	if err != nil {
		return nil, err
	}
	apiVersions, err := action.GetVersionSet(d.discovery)
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		// An orphaned API service is only a warning to Helm too.
		return nil, err
	}
	caps := &chartutil.Capabilities{
		APIVersions: apiVersions,
		KubeVersion: chartutil.KubeVersion{Version: version.GitVersion, Major: version.Major, Minor: version.Minor},
		HelmVersion: chartutil.DefaultCapabilities.HelmVersion,
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.caps, d.capsAt = caps, time.Now()
	return caps, nil
}

// invalidatingDiscovery tells its identity when Helm invalidates it
// (after installing CRDs), so the Capabilities go with it.
type invalidatingDiscovery struct {
	discovery.CachedDiscoveryInterface
	onInvalidate func()
}

func (d *invalidatingDiscovery) Invalidate() {
	d.CachedDiscoveryInterface.Invalidate()
	d.onInvalidate()
}

// missingKindMapper refreshes its identity's discovery when a kind is not
// found, and asks once more: the kind's CRD may have been installed since
// the mapper last looked.
type missingKindMapper struct {
	meta.ResettableRESTMapper
	d *identityDiscovery
}

func (m missingKindMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	r, err := m.ResettableRESTMapper.RESTMapping(gk, versions...)
	if meta.IsNoMatchError(err) && m.d.refreshForMissingKind() {
		r, err = m.ResettableRESTMapper.RESTMapping(gk, versions...)
	}
	return r, err
}

func (m missingKindMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	r, err := m.ResettableRESTMapper.RESTMappings(gk, versions...)
	if meta.IsNoMatchError(err) && m.d.refreshForMissingKind() {
		r, err = m.ResettableRESTMapper.RESTMappings(gk, versions...)
	}
	return r, err
}

func (m missingKindMapper) KindFor(resource schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	r, err := m.ResettableRESTMapper.KindFor(resource)
	if meta.IsNoMatchError(err) && m.d.refreshForMissingKind() {
		r, err = m.ResettableRESTMapper.KindFor(resource)
	}
	return r, err
}

package image

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
)

// PlainHTTPError is the error of a plain-HTTP request to a registry that is
// not marked insecure. go-containerregistry falls back to plain HTTP on its
// own for localhost, loopback and private addresses when HTTPS fails; the
// scheme guard turns that fallback into this error, so credentials and
// images never travel unencrypted unless the spec says so.
type PlainHTTPError struct {
	// Host the request went to.
	Host string
}

// Error says which registry was refused and how to allow it.
func (e *PlainHTTPError) Error() string {
	return fmt.Sprintf("refusing plain HTTP to registry %s: HTTPS failed and the registry is not marked insecure (set spec.registry.insecure: true to allow plain HTTP)", e.Host)
}

// schemeGuard fails every http:// request unless it goes to a registry
// host allowed plain HTTP: the environment's own when Registry.Insecure,
// and the registries of base images marked baseInsecure. Base images on
// other registries stay HTTPS-only.
type schemeGuard struct {
	next http.RoundTripper
	// plainHTTPHost is the environment's registry when it is insecure;
	// empty allows none.
	plainHTTPHost string
	// baseHosts are the hosts of bases marked insecure.
	baseHosts sync.Map
}

// allowPlainHTTP allows plain HTTP to host from now on.
func (g *schemeGuard) allowPlainHTTP(host string) { g.baseHosts.Store(strings.ToLower(host), true) }

func (g *schemeGuard) plainHTTPAllowed(host string) bool {
	if g.plainHTTPHost != "" && strings.EqualFold(host, g.plainHTTPHost) {
		return true
	}
	_, ok := g.baseHosts.Load(strings.ToLower(host))
	return ok
}

// RoundTrip refuses plain HTTP to any host but the allowed ones.
func (g *schemeGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme == "http" && !g.plainHTTPAllowed(req.URL.Host) {
		return nil, &PlainHTTPError{Host: req.URL.Host}
	}
	return g.next.RoundTrip(req)
}

// uploadCounterKey holds the *atomic.Int64 that counts the blob uploads of
// one call in its context; a Builder is shared by concurrent builds, so the
// count cannot live in the Builder.
type uploadCounterKey struct{}

// withUploadCounter returns ctx carrying a fresh upload counter.
func withUploadCounter(ctx context.Context) (context.Context, *atomic.Int64) {
	n := new(atomic.Int64)
	return context.WithValue(ctx, uploadCounterKey{}, n), n
}

// uploadCounter counts completed blob uploads: the final PUT of an upload
// session (/v2/<repo>/blobs/uploads/<id>?digest=...) that the registry
// accepted. Blobs the registry already had are skipped by
// go-containerregistry after a HEAD and never reach that PUT, and a
// cross-repository mount completes with the POST, so neither is counted.
type uploadCounter struct {
	next http.RoundTripper
}

// RoundTrip passes req on and counts it if it completed a blob upload.
func (c *uploadCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(req)
	if err != nil || req.Method != http.MethodPut || !strings.Contains(req.URL.Path, "/blobs/uploads/") || req.URL.Query().Get("digest") == "" {
		return resp, err
	}
	if resp.StatusCode == http.StatusCreated || resp.StatusCode == http.StatusNoContent {
		if n, ok := req.Context().Value(uploadCounterKey{}).(*atomic.Int64); ok {
			n.Add(1)
		}
	}
	return resp, err
}

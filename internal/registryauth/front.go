package registryauth

import (
	"context"
	"net/http"
	"net/http/httputil"
	"net/url"
	"regexp"
	"time"

	"github.com/devloop-dev/devloop/internal/httpserve"
)

// Front stands before the bundled registry, in its pod, on the port
// clients use: /token goes to the operator's token service, everything
// else to the registry on the pod's loopback. It rewrites the realm of the
// registry's Bearer challenge to /token on the very host and port the
// client called, because
//   - the registry is reached under several names (its Service name from
//     pods, the node's address or localhost:NodePort from the kubelet) and a
//     realm is one fixed URL in its configuration;
//   - go-containerregistry refuses a realm on a private address unless it
//     is the registry's own host:port (its SSRF guard), and containerd on
//     the node cannot resolve a Service name.
type Front struct {
	registry, token *httputil.ReverseProxy
	backend         *url.URL
}

// HealthPath answers 200 when the registry behind the front answers /v2/
// at all (401 included): the registry listens on the pod's loopback, where
// the kubelet's probes cannot reach it.
const HealthPath = "/devloop-front/healthz"

// NewFront proxies to the registry at registryURL (http://127.0.0.1:5001)
// and the token service at tokenURL (https://operator-service:5002/token),
// whose certificate is checked against tokenCA (PEM; nil: the system's
// roots). The tokens clients send cross the pod network to the operator
// only inside TLS.
func NewFront(registryURL, tokenURL *url.URL, tokenCA []byte) (*Front, error) {
	reg := httputil.NewSingleHostReverseProxy(registryURL)
	// Blobs stream through: no buffering beyond the proxy's copy buffer.
	reg.FlushInterval = -1
	reg.ModifyResponse = func(resp *http.Response) error {
		if ch := resp.Header.Get("Www-Authenticate"); ch != "" {
			resp.Header.Set("Www-Authenticate", realmAttr.ReplaceAllLiteralString(ch, `realm="`+realmFor(resp.Request)+`"`))
		}
		return nil
	}
	// The outgoing request's Host is the registry's loopback; keep the
	// client's in a header the realm is built from.
	director := reg.Director
	reg.Director = func(r *http.Request) {
		r.Header.Set(clientHostHeader, r.Host)
		if r.TLS != nil {
			r.Header.Set(clientSchemeHeader, "https")
		} else {
			r.Header.Set(clientSchemeHeader, "http")
		}
		director(r)
	}
	tok := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.Out.URL.Scheme, pr.Out.URL.Host, pr.Out.URL.Path = tokenURL.Scheme, tokenURL.Host, tokenURL.Path
		pr.Out.Host = tokenURL.Host
		// The token service limits reviews per client, not per front.
		pr.SetXForwarded()
	}}
	if tokenCA != nil {
		cfg, err := httpserve.ClientTLS(tokenCA)
		if err != nil {
			return nil, err
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = cfg
		tok.Transport = tr
	}
	return &Front{registry: reg, token: tok, backend: registryURL}, nil
}

const (
	clientHostHeader   = "X-Devloop-Client-Host"
	clientSchemeHeader = "X-Devloop-Client-Scheme"
)

var realmAttr = regexp.MustCompile(`realm="[^"]*"`)

// realmFor is the token URL on the host the client called.
func realmFor(out *http.Request) string {
	return out.Header.Get(clientSchemeHeader) + "://" + out.Header.Get(clientHostHeader) + "/token"
}

// ServeHTTP routes one request.
func (f *Front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/token" {
		f.token.ServeHTTP(w, r)
		return
	}
	if r.URL.Path == HealthPath {
		f.health(w, r)
		return
	}
	// Whatever a client sent in these headers is not the front's word.
	r.Header.Del(clientHostHeader)
	r.Header.Del(clientSchemeHeader)
	f.registry.ServeHTTP(w, r)
}

func (f *Front) health(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.backend.String()+"/v2/", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, "registry: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusUnauthorized {
		http.Error(w, "registry: "+resp.Status, http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ok\n"))
}

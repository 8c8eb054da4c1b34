package helm

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/fault"
)

// ChartCredentials are an environment's spec.chartCredentials. A URL gets
// the Secret of the longest prefix it starts with; the Secret is read as
// the environment's ServiceAccount (Reader is the tenant's client, never
// the operator's), once per chart load and only when a URL needs it, so an
// entry for a repository the chart does not use costs nothing.
type ChartCredentials struct {
	Entries   []v1alpha1.ChartCredentials
	Namespace string
	Reader    client.Reader

	mu   sync.Mutex
	read map[int]*chartSecret
}

// chartAuth is what a request carries: basic auth, which Helm's chart
// repositories and OCI registries (as oras' credential) both take.
type chartAuth struct {
	Username, Password string
}

// chartSecret is one Secret's content: username and password, or a docker
// config's credentials by registry host.
type chartSecret struct {
	basic  *chartAuth
	byHost map[string]chartAuth
}

// For returns the credentials for rawURL (an http(s) URL, or an oci://
// reference), or nil when no prefix matches it.
func (c *ChartCredentials) For(ctx context.Context, rawURL string) (*chartAuth, error) {
	if c == nil {
		return nil, nil
	}
	i := c.match(rawURL)
	if i < 0 {
		return nil, nil
	}
	s, err := c.secret(ctx, i)
	if err != nil {
		return nil, err
	}
	if s.basic != nil {
		return s.basic, nil
	}
	host := urlHost(rawURL)
	if a, ok := s.byHost[host]; ok {
		return &a, nil
	}
	return nil, fault.Permanentf("spec.chartCredentials[%d].secretRef: Secret %q: its docker config has no entry for %s", i, c.Entries[i].SecretRef.Name, host)
}

// match is the index of the longest prefix rawURL starts with, -1 if none.
func (c *ChartCredentials) match(rawURL string) int {
	best := -1
	for i, e := range c.Entries {
		if prefixMatches(rawURL, e.URLPrefix) && (best < 0 || len(e.URLPrefix) > len(c.Entries[best].URLPrefix)) {
			best = i
		}
	}
	return best
}

// prefixMatches says whether rawURL starts with prefix at a path boundary:
// the prefix ends with '/', or the URL ends there or goes on with '/'. So
// https://a.example matches https://a.example/charts but neither
// https://a.example.evil nor https://a.example:8443, and
// https://a.example/team matches nothing of https://a.example/teammate.
func prefixMatches(rawURL, prefix string) bool {
	if prefix == "" || !strings.HasPrefix(rawURL, prefix) {
		return false
	}
	return len(rawURL) == len(prefix) || strings.HasSuffix(prefix, "/") || rawURL[len(prefix)] == '/'
}

// secret reads entry i's Secret, once.
func (c *ChartCredentials) secret(ctx context.Context, i int) (*chartSecret, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.read[i]; ok {
		return s, nil
	}
	field := fmt.Sprintf("spec.chartCredentials[%d].secretRef", i)
	name := c.Entries[i].SecretRef.Name
	if c.Reader == nil {
		return nil, fmt.Errorf("%s: no client to read Secret %q", field, name)
	}
	var sec corev1.Secret
	if err := c.Reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, &sec); err != nil {
		switch {
		case apierrors.IsNotFound(err):
			return nil, fault.Permanentf("%s: Secret %q not found in namespace %q", field, name, c.Namespace)
		case apierrors.IsForbidden(err):
			return nil, fault.Permanentf("%s: the environment's ServiceAccount may not read Secret %q", field, name)
		}
		return nil, fmt.Errorf("%s: reading Secret %q: %w", field, name, err)
	}
	s, err := parseChartSecret(sec.Data)
	if err != nil {
		return nil, fault.Permanentf("%s: Secret %q: %v", field, name, err)
	}
	if c.read == nil {
		c.read = map[int]*chartSecret{}
	}
	c.read[i] = s
	return s, nil
}

// parseChartSecret reads username and password keys, or a docker config.
// Errors name keys, never values.
func parseChartSecret(data map[string][]byte) (*chartSecret, error) {
	user, pass := string(data["username"]), string(data["password"])
	switch {
	case user != "" || pass != "":
		if user == "" || pass == "" {
			return nil, fmt.Errorf("has one of the keys username and password but not the other")
		}
		return &chartSecret{basic: &chartAuth{Username: user, Password: pass}}, nil
	case len(data[corev1.DockerConfigJsonKey]) > 0:
		byHost, err := parseDockerAuths(data[corev1.DockerConfigJsonKey])
		if err != nil {
			return nil, err
		}
		return &chartSecret{byHost: byHost}, nil
	}
	return nil, fmt.Errorf("has neither the keys username and password nor %s", corev1.DockerConfigJsonKey)
}

// parseDockerAuths reads the auths of a .dockerconfigjson by host: an
// entry's "auth" (base64 of user:password) or its username and password.
func parseDockerAuths(doc []byte) (map[string]chartAuth, error) {
	var cfg struct {
		Auths map[string]struct {
			Auth     string `json:"auth"`
			Username string `json:"username"`
			Password string `json:"password"`
		} `json:"auths"`
	}
	if err := json.Unmarshal(doc, &cfg); err != nil {
		// The JSON error could quote the document: say only that it is bad.
		return nil, fmt.Errorf("key %s is not a docker config JSON document", corev1.DockerConfigJsonKey)
	}
	out := map[string]chartAuth{}
	for key, e := range cfg.Auths {
		a := chartAuth{Username: e.Username, Password: e.Password}
		if e.Auth != "" {
			raw, err := base64.StdEncoding.DecodeString(e.Auth)
			if err != nil {
				raw, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(e.Auth, "="))
			}
			user, pass, ok := strings.Cut(string(raw), ":")
			if err != nil || !ok {
				return nil, fmt.Errorf("the docker config's entry for %s: \"auth\" is not base64 of user:password", urlHost(key))
			}
			a = chartAuth{Username: user, Password: pass}
		}
		out[urlHost(key)] = a
	}
	return out, nil
}

// urlHost is the host (and port) of a URL, an oci:// reference or a
// docker config key, lower case.
func urlHost(s string) string {
	if i := strings.Index(s, "://"); i >= 0 {
		s = s[i+3:]
	}
	s, _, _ = strings.Cut(s, "/")
	return strings.ToLower(s)
}

// authTransport adds the credentials of each request's own URL, so a
// repository's index, its archives (which the index may place anywhere)
// and every redirect get credentials only where a prefix says so.
type authTransport struct {
	base  http.RoundTripper
	creds *ChartCredentials
}

func (t *authTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	a, err := t.creds.For(req.Context(), req.URL.String())
	if err != nil {
		return nil, err
	}
	if a == nil {
		return t.base.RoundTrip(req)
	}
	// On a clone: the client never sees the header, so it cannot carry
	// it over a redirect to a URL no prefix matches.
	req = req.Clone(req.Context())
	req.SetBasicAuth(a.Username, a.Password)
	return t.base.RoundTrip(req)
}

// withCredentials returns hc, or a copy that adds creds to its requests.
func withCredentials(hc *http.Client, creds *ChartCredentials) *http.Client {
	if creds == nil || len(creds.Entries) == 0 {
		return hc
	}
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	out := *hc
	out.Transport = &authTransport{base: base, creds: creds}
	return &out
}

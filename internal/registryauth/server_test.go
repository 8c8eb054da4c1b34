package registryauth

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// tokenClaims decodes (without verifying: the registry does that, see
// TestRegistryAuthorizesByNamespace) the claims of a token answer.
func tokenClaims(t *testing.T, resp *http.Response) Claims {
	t.Helper()
	var tr tokenResponse
	if err := json.NewDecoder(resp.Body).Decode(&tr); err != nil {
		t.Fatal(err)
	}
	if tr.Token == "" || tr.Token != tr.AccessToken {
		t.Fatalf("answer %+v: want token and access_token, the same", tr)
	}
	parts := strings.Split(tr.Token, ".")
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c Claims
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// containerd (the kubelet's pulls) asks with OAuth2's password grant, all
// scopes in one field; a token asking for two namespaces is granted only
// the caller's.
func TestTokenServicePasswordGrant(t *testing.T) {
	a, b := newTenant(t, "grant-a-"), newTenant(t, "grant-b-")
	srv := newTokenServer(t, operatorCS)

	form := url.Values{
		"grant_type": {"password"}, "username": {"kubelet"}, "password": {a.builderRegistryToken},
		"service": {DefaultService}, "client_id": {"containerd-client"},
		"scope": {"repository:" + a.ns + "/app:pull repository:" + b.ns + "/app:pull,push registry:catalog:*"},
	}
	resp, err := http.PostForm(srv.URL, form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	c := tokenClaims(t, resp)
	want := "system:serviceaccount:" + a.ns + ":" + a.builderSA
	if c.Subject != want || c.Audience != DefaultService || c.Issuer != DefaultIssuer || c.Expiration-c.IssuedAt != int64(DefaultTTL.Seconds()) {
		t.Errorf("claims %+v: want sub %s, aud %s, iss %s, %s", c, want, DefaultService, DefaultIssuer, DefaultTTL)
	}
	if len(c.Access) != 1 || c.Access[0].Name != a.ns+"/app" || strings.Join(c.Access[0].Actions, ",") != "pull" {
		t.Errorf("access %+v: want pull on %s/app only", c.Access, a.ns)
	}

	// Refused before anything is reviewed or signed: no credentials, a
	// refresh-token grant, another service.
	for what, req := range map[string]func() (*http.Response, error){
		"no credentials": func() (*http.Response, error) {
			return http.Get(srv.URL + "?service=" + DefaultService + "&scope=repository:" + a.ns + "/app:pull")
		},
		"refresh token grant": func() (*http.Response, error) {
			return http.PostForm(srv.URL, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {a.builderToken}, "service": {DefaultService}})
		},
		"another service": func() (*http.Response, error) {
			r, _ := http.NewRequest(http.MethodGet, srv.URL+"?service=elsewhere", nil)
			r.SetBasicAuth("x", a.builderToken)
			return http.DefaultClient.Do(r)
		},
	} {
		resp, err := req()
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("%s: 200, want refused", what)
		}
	}
}

// The front sends the client to /token on the host it called, whatever
// realm the registry's configuration names.
func TestFrontRewritesTheRealm(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Www-Authenticate", `Bearer realm="http://registry.invalid/token",service="devloop-registry",scope="repository:a/b:pull"`)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer backend.Close()
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("token service saw " + r.URL.Path + "?" + r.URL.RawQuery))
	}))
	defer tokens.Close()
	bu, _ := url.Parse(backend.URL)
	tu, _ := url.Parse(tokens.URL + "/token")
	fr, err := NewFront(bu, tu, nil)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(fr)
	defer front.Close()

	req, _ := http.NewRequest(http.MethodGet, front.URL+"/v2/", nil)
	req.Host = "10.250.0.1:30500" // as the kubelet names the registry
	req.Header.Set(clientHostHeader, "evil.example")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	want := `Bearer realm="http://10.250.0.1:30500/token",service="devloop-registry",scope="repository:a/b:pull"`
	if got := resp.Header.Get("Www-Authenticate"); got != want {
		t.Errorf("challenge %q, want %q", got, want)
	}

	// The kubelet's readiness probe: the registry answers (401 is an
	// answer); then it is gone.
	resp, err = http.Get(front.URL + HealthPath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("health with the registry up: %d", resp.StatusCode)
	}
	backend.Close()
	resp, err = http.Get(front.URL + HealthPath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("health with the registry down: %d, want 503", resp.StatusCode)
	}

	resp, err = http.Get(front.URL + "/token?service=devloop-registry")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	if string(body) != "token service saw /token?service=devloop-registry" {
		t.Errorf("/token reached %q", body)
	}
}

// A token of the API server's own audience (a plain `kubectl create
// token`) is an API credential: /token refuses it, so a team that forgot
// --audience learns so at once instead of sending it on every push; the
// same ServiceAccount's devloop-registry token is accepted.
func TestTokenServiceAcceptsOnlyTheRegistryAudience(t *testing.T) {
	a := newTenant(t, "audience-")
	srv := newTokenServer(t, operatorCS)
	ask := func(token string) int { return askPull(t, srv, a.ns, token) }
	if got := ask(a.builderToken); got != http.StatusUnauthorized {
		t.Errorf("a token of the API server's audience: %d, want 401", got)
	}
	if got := ask(a.builderRegistryToken); got != http.StatusOK {
		t.Errorf("a token of the devloop-registry audience: %d, want 200", got)
	}
}

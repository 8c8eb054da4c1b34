package registryauth

import (
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/go-logr/logr/testr"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/devloop-dev/devloop/internal/testregistry"
)

// registryAuthConfig is the chart's auth section of the registry's
// configuration (templates/_helpers.tpl devloop.registryConfig).
func registryAuthConfig(realm, certFile string) string {
	return fmt.Sprintf(`auth:
  token:
    realm: %s
    service: %s
    issuer: %s
    rootcertbundle: %s
`, realm, DefaultService, DefaultIssuer, certFile)
}

// startTokenService serves the token endpoint with the operator's
// connection (the chart's ClusterRole) and a fresh signing key, starts the
// real distribution registry trusting it and the front before both, as the
// chart's registry pod runs it. It returns the front's host: the
// registry's address for clients.
func startTokenService(t *testing.T) (registry string, tokenURL string) {
	t.Helper()
	signer, certFile := testSigner(t)
	// TLS, as the operator serves it; the front trusts its certificate.
	srv := httptest.NewTLSServer(&Server{
		Reviewer: KubeReviewer{Client: operatorCS}, Signer: signer,
		Service: DefaultService, Issuer: DefaultIssuer, Audience: DefaultAudience,
		Log: testr.New(t),
	})
	t.Cleanup(srv.Close)
	tokenURL = srv.URL + "/token"
	// The realm in the configuration is never seen by a client: the front
	// rewrites it to the host the client called.
	backend := testregistry.StartWithConfig(t, registryAuthConfig("http://front.invalid/token", certFile))
	tu, _ := url.Parse(tokenURL)
	fr, err := NewFront(&url.URL{Scheme: "http", Host: backend}, tu, certPEM(srv))
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(fr)
	t.Cleanup(front.Close)
	return strings.TrimPrefix(front.URL, "http://"), tokenURL
}

// TestRegistryAuthorizesByNamespace: on the bundled registry with the
// token service, team-b's identities can neither push into team-a's
// repositories nor pull from them; team-a's builder can, with a token
// bound to the registry's audience (not with its API token); a team-a identity
// that may not create pods, anonymous callers and forged tokens get
// nothing; repositories outside every namespace are nobody's.
func TestRegistryAuthorizesByNamespace(t *testing.T) {
	a, b := newTenant(t, "team-a-"), newTenant(t, "team-b-")
	host, _ := startTokenService(t)
	ref := func(repo string) name.Reference {
		r, err := name.ParseReference(host+"/"+repo, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	as := func(token string) remote.Option {
		if token == "" {
			return remote.WithAuth(authn.Anonymous)
		}
		return remote.WithAuth(&authn.Basic{Username: "k8s", Password: token})
	}
	push := func(token, repo string) (v1.Hash, error) {
		img, err := random.Image(512, 1)
		if err != nil {
			t.Fatal(err)
		}
		d, _ := img.Digest()
		return d, remote.Write(ref(repo), img, as(token))
	}
	pull := func(token, repo string) (v1.Hash, error) {
		desc, err := remote.Head(ref(repo), as(token))
		if err != nil {
			return v1.Hash{}, err
		}
		return desc.Digest, nil
	}

	// team-a's builder pushes its source and pulls it back.
	srcA := a.ns + "/src:dev"
	want, err := push(a.builderRegistryToken, srcA)
	if err != nil {
		t.Fatalf("team-a's builder pushing %s: %v", srcA, err)
	}
	if got, err := pull(a.builderRegistryToken, srcA); err != nil || got != want {
		t.Fatalf("team-a's builder pulling %s: %v, %v (want %v)", srcA, got, err, want)
	}
	if _, err := push(b.builderRegistryToken, b.ns+"/src:dev"); err != nil {
		t.Errorf("team-b's builder pushing into its own namespace: %v", err)
	}

	refused := map[string]func() error{
		"team-b's builder pushes team-a's source tag": func() error { _, err := push(b.builderRegistryToken, srcA); return err },
		"team-b's builder pushes a new team-a tag":    func() error { _, err := push(b.builderRegistryToken, a.ns+"/src:evil"); return err },
		"team-a's builder with an API-audience token": func() error { _, err := push(a.builderToken, a.ns+"/src:api"); return err },
		"team-b's builder pulls team-a's source":      func() error { _, err := pull(b.builderRegistryToken, srcA); return err },
		"team-a's viewer (no pods create) pushes":     func() error { _, err := push(a.viewerRegistryToken, a.ns+"/src:viewer"); return err },
		"team-a's viewer pulls":                       func() error { _, err := pull(a.viewerRegistryToken, srcA); return err },
		"anonymous pull":                              func() error { _, err := pull("", srcA); return err },
		"anonymous push":                              func() error { _, err := push("", a.ns+"/src:anon"); return err },
		"a forged token":                              func() error { _, err := push("not-a-kubernetes-token", a.ns+"/src:forged"); return err },
		"a repository of no namespace":                func() error { _, err := push(a.builderRegistryToken, "busybox:1"); return err },
	}
	for what, try := range refused {
		err := try()
		if err == nil {
			t.Errorf("%s: allowed, want refused", what)
			continue
		}
		var terr *transport.Error
		if !errors.As(err, &terr) || (terr.StatusCode != http.StatusUnauthorized && terr.StatusCode != http.StatusForbidden) {
			t.Errorf("%s: %v, want the registry's or the token service's 401/403", what, err)
			continue
		}
		t.Logf("%s: refused (%d)", what, terr.StatusCode)
	}
	// The tag team-a follows still names team-a's image.
	if got, err := pull(a.builderRegistryToken, srcA); err != nil || got != want {
		t.Errorf("%s after team-b's attempts: %v, %v; want %v", srcA, got, err, want)
	}
}

// certPEM is the certificate of a TLS test server, as a CA bundle.
func certPEM(srv *httptest.Server) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

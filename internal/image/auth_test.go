package image

import (
	"context"
	"encoding/base64"
	"net/http"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	. "github.com/onsi/gomega"

	"github.com/devloop-dev/devloop/internal/fault"
)

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func TestKeychainFromDockerConfig(t *testing.T) {
	doc := `{"auths": {
		"registry.example:5000": {"auth": "` + b64("alice:s3cr:et") + `"},
		"https://ghcr.io": {"username": "bob", "password": "pw"},
		"https://index.docker.io/v1/": {"auth": "` + b64("carol:hub") + `"},
		"quay.io/v2/": {"auth": "` + base64.RawStdEncoding.EncodeToString([]byte("dave:unpadded")) + `"},
		"HTTP://Lower.Example": {"identitytoken": "tok"}
	}}`
	kc, err := KeychainFromDockerConfig([]byte(doc))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())

	tests := []struct {
		ref  string
		want authn.AuthConfig
	}{
		{"registry.example:5000/team/app", authn.AuthConfig{Username: "alice", Password: "s3cr:et"}},
		{"ghcr.io/org/app:v1", authn.AuthConfig{Username: "bob", Password: "pw"}},
		{"golang:1.25", authn.AuthConfig{Username: "carol", Password: "hub"}},
		{"docker.io/library/alpine", authn.AuthConfig{Username: "carol", Password: "hub"}},
		{"quay.io/org/app", authn.AuthConfig{Username: "dave", Password: "unpadded"}},
		{"lower.example/app", authn.AuthConfig{IdentityToken: "tok"}},
		{"registry.example/team/app", authn.AuthConfig{}}, // another port: anonymous
		{"other.example/app", authn.AuthConfig{}},
	}
	for _, tc := range tests {
		t.Run(tc.ref, func(t *testing.T) {
			g := NewWithT(t)
			ref, err := name.ParseReference(tc.ref)
			g.Expect(err).NotTo(HaveOccurred())
			a, err := kc.Resolve(ref.Context())
			g.Expect(err).NotTo(HaveOccurred())
			cfg, err := a.Authorization()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(*cfg).To(Equal(tc.want))
		})
	}
}

func TestKeychainFromDockerConfigErrors(t *testing.T) {
	tests := []struct{ name, doc string }{
		{"not json", `{"auths": `},
		{"auth not base64", `{"auths": {"r.example": {"auth": "%%%secret%%%"}}}`},
		{"auth without colon", `{"auths": {"r.example": {"auth": "` + b64("secretonly") + `"}}}`},
		{"empty key", `{"auths": {"https://": {"auth": "` + b64("a:b") + `"}}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := KeychainFromDockerConfig([]byte(tc.doc))
			g.Expect(err).To(HaveOccurred())
			g.Expect(fault.IsPermanent(err)).To(BeTrue())
			g.Expect(err.Error()).NotTo(ContainSubstring("secret"), "credentials leaked into the error")
		})
	}
}

// TestKeychainAuthenticatesPush pushes to a registry that wants basic auth
// with the credentials from a .dockerconfigjson.
func TestKeychainAuthenticatesPush(t *testing.T) {
	requireAuth := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if user, pass, ok := r.BasicAuth(); !ok || user != "alice" || pass != "pw" {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	host := startRegistry(t, requireAuth)

	for _, tc := range []struct {
		name, user string
		ok         bool
	}{{"right credentials", "alice", true}, {"wrong credentials", "mallory", false}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			kc, err := KeychainFromDockerConfig([]byte(`{"auths": {"` + host + `": {"auth": "` + b64(tc.user+":pw") + `"}}}`))
			g.Expect(err).NotTo(HaveOccurred())
			b, err := NewBuilder(Registry{Prefix: host + "/team", Insecure: true, Keychain: kc}, fastRetries())
			g.Expect(err).NotTo(HaveOccurred())
			_, err = b.Build(context.Background(), Spec{Name: "app", Entrypoint: []string{"/app"}}, "", nil)
			if tc.ok {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(fault.IsPermanent(err)).To(BeTrue(), "%v", err)
			g.Expect(err.Error()).To(HavePrefix("push access denied to " + host + "/team/app: check credentialsRef"))
		})
	}
}

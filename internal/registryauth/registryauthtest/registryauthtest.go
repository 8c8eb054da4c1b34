// Package registryauthtest runs the bundled registry as the chart does, for
// tests: the real distribution registry with token authentication, the
// operator's token service (reviewing with the connection given) and the
// front before both.
package registryauthtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"k8s.io/client-go/kubernetes"

	"github.com/devloop-dev/devloop/internal/registryauth"
	"github.com/devloop-dev/devloop/internal/testregistry"
)

// Start returns the host ("127.0.0.1:port", plain HTTP) of a registry
// whose repositories <namespace>/... only identities that may create pods
// in <namespace> push and pull; reviewer reviews tokens and access.
func Start(t *testing.T, reviewer kubernetes.Interface) string {
	t.Helper()
	signer, certFile := Signer(t)
	// TLS, as the operator serves it; the front trusts its certificate.
	tokens := httptest.NewTLSServer(&registryauth.Server{
		Reviewer: registryauth.KubeReviewer{Client: reviewer}, Signer: signer,
		Service: registryauth.DefaultService, Issuer: registryauth.DefaultIssuer, Audience: registryauth.DefaultAudience,
		Log: testr.New(t),
	})
	t.Cleanup(tokens.Close)
	// The realm in the configuration is never seen by a client: the front
	// rewrites it to the host the client called.
	backend := testregistry.StartWithConfig(t, fmt.Sprintf(`auth:
  token:
    realm: http://registry.invalid/token
    service: %s
    issuer: %s
    rootcertbundle: %s
`, registryauth.DefaultService, registryauth.DefaultIssuer, certFile))
	tu, _ := url.Parse(tokens.URL + "/token")
	fr, err := registryauth.NewFront(&url.URL{Scheme: "http", Host: backend}, tu,
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tokens.Certificate().Raw}))
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(fr)
	t.Cleanup(front.Close)
	return strings.TrimPrefix(front.URL, "http://")
}

// Signer makes an ECDSA P-256 key and its self-signed certificate, as the
// chart does, and writes the certificate (the registry's rootcertbundle)
// to a file.
func Signer(t *testing.T) (*registryauth.Signer, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "devloop-registry-token"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	s, err := registryauth.NewSigner(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), certPEM)
	if err != nil {
		t.Fatal(err)
	}
	certFile := filepath.Join(t.TempDir(), "tls.crt")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return s, certFile
}

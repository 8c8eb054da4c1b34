package registryauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devloop-dev/devloop/internal/testenv"
)

// tenant is one namespace with a ServiceAccount that may create pods
// there (a builder, a deployer) and one that may not (a viewer).
type tenant struct {
	ns                   string
	builderSA, viewerSA  string
	builderToken         string
	builderRegistryToken string // audience devloop-registry only
	viewerToken          string
	viewerRegistryToken  string
}

// newTenant makes a namespace, its two ServiceAccounts and a Role
// granting create on pods to the builder only, and requests their tokens
// (TokenRequest) as the administrator.
func newTenant(t *testing.T, prefix string) tenant {
	t.Helper()
	ctx := context.Background()
	tn := tenant{ns: testenv.Namespace(t, admin, prefix), builderSA: "builder", viewerSA: "viewer"}
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: tn.ns, Name: "pod-creator"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create", "get"}}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: tn.ns, Name: "pod-creator"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: tn.ns, Name: tn.builderSA}},
	}
	for _, sa := range []string{tn.builderSA, tn.viewerSA} {
		if err := admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: tn.ns, Name: sa}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := admin.Create(ctx, role); err != nil {
		t.Fatal(err)
	}
	if err := admin.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	tn.builderToken = requestToken(t, tn.ns, tn.builderSA, nil)
	tn.builderRegistryToken = requestToken(t, tn.ns, tn.builderSA, []string{DefaultAudience})
	tn.viewerToken = requestToken(t, tn.ns, tn.viewerSA, nil)
	tn.viewerRegistryToken = requestToken(t, tn.ns, tn.viewerSA, []string{DefaultAudience})
	return tn
}

func requestToken(t *testing.T, ns, sa string, audiences []string) string {
	t.Helper()
	tr, err := adminSet.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), sa, &authnv1.TokenRequest{
		Spec: authnv1.TokenRequestSpec{Audiences: audiences},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s/%s: %v", ns, sa, err)
	}
	return tr.Status.Token
}

// testSigner makes an ECDSA P-256 key and its self-signed certificate, as
// the chart does, and writes the certificate for the registry's
// rootcertbundle.
func testSigner(t *testing.T) (*Signer, string) {
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
	s, err := NewSigner(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), certPEM)
	if err != nil {
		t.Fatal(err)
	}
	certFile := filepath.Join(t.TempDir(), "tls.crt")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return s, certFile
}

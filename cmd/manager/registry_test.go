package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/devloop-dev/devloop/internal/httpserve"
	"github.com/devloop-dev/devloop/internal/testenv"
)

// The manager started as the chart starts it serves the registry's token
// endpoint, reviewing tokens with the chart's ClusterRole: a
// ServiceAccount's token is answered, no token is not.
// (internal/registryauth proves the decisions against the registry.)
func TestManagerServesRegistryTokens(t *testing.T) {
	admin, operator := apiServer(t)
	ctx := context.Background()
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "devloop-registry-token"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	keyFile, certFile := filepath.Join(dir, "tls.key"), filepath.Join(dir, "tls.crt")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	ns := testenv.Namespace(t, admin, "registry-token-")
	if err := admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "builder"}}); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(apiEnv.Config)
	if err != nil {
		t.Fatal(err)
	}
	// The registry's own audience: a token of the API server's audience is
	// an API credential the token service refuses (issue 44 item 3).
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "builder", &authnv1.TokenRequest{
		Spec: authnv1.TokenRequestSpec{Audiences: []string{"devloop-registry"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	apiToken, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "builder", &authnv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// The service's serving certificate (the chart's token.crt/token.key)
	// and a client that trusts only it.
	serving, servingPEM, err := httpserve.SelfSigned("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	servingKey, err := x509.MarshalPKCS8PrivateKey(serving.Certificates[0].PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	tlsCert, tlsKey := filepath.Join(dir, "token.crt"), filepath.Join(dir, "token.key")
	if err := os.WriteFile(tlsCert, servingPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tlsKey, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: servingKey}), 0o600); err != nil {
		t.Fatal(err)
	}
	clientTLS, err := httpserve.ClientTLS(servingPEM)
	if err != nil {
		t.Fatal(err)
	}
	httpsClient := &http.Client{Transport: &http.Transport{TLSClientConfig: clientTLS}, Timeout: 10 * time.Second}

	addr := freeAddr(t)
	startManager(t, operator, "--registry-token-bind-address="+addr, "--registry-token-key="+keyFile, "--registry-token-cert="+certFile,
		"--registry-token-tls-cert="+tlsCert, "--registry-token-tls-key="+tlsKey)
	askOver := func(c *http.Client, scheme, token string) int {
		req, _ := http.NewRequest(http.MethodGet, scheme+"://"+addr+"/token?service=devloop-registry&scope=repository:"+ns+"/app:pull", nil)
		if token != "" {
			req.SetBasicAuth("builder", token)
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	ask := func(token string) int { return askOver(httpsClient, "https", token) }
	code := ask(tr.Status.Token)
	for deadline := time.Now().Add(30 * time.Second); code == 0 && time.Now().Before(deadline); code = ask(tr.Status.Token) {
		time.Sleep(100 * time.Millisecond)
	}
	if code != http.StatusOK {
		t.Fatalf("a ServiceAccount's token: %d, want 200", code)
	}
	if code := ask(""); code != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", code)
	}
	if code := ask(apiToken.Status.Token); code != http.StatusUnauthorized {
		t.Errorf("a token of the API server's audience: %d, want 401", code)
	}
	if code := ask("forged"); code != http.StatusUnauthorized {
		t.Errorf("a forged token: %d, want 401", code)
	}
	// The same valid token in clear is answered by the TLS layer only.
	if code := askOver(http.DefaultClient, "http", tr.Status.Token); code != http.StatusBadRequest {
		t.Errorf("a valid token over plain HTTP: %d, want the TLS layer's 400", code)
	}
}

package devcluster

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The certificates OLM v1's cert-manager overlay asks cert-manager for,
// made here instead: cert-manager is a large build for three certificates.
// The Secrets have the names and keys the overlay mounts (tls.crt, tls.key,
// ca.crt); catalogd serves catalogs and its webhook with its certificate,
// operator-controller trusts the CA (--catalogd-cas-dir) to download them.
const (
	olmCASecret       = "olmv1-ca"
	olmCertLifetime   = 365 * 24 * time.Hour
	olmCertRenewAhead = 30 * 24 * time.Hour
)

// olmServingCerts are the serving certificates, by Secret name.
var olmServingCerts = map[string][]string{
	"catalogd-service-cert-git-version": {
		"localhost",
		"catalogd-service." + OLMNamespace + ".svc",
		"catalogd-service." + OLMNamespace + ".svc.cluster.local",
	},
	"olmv1-cert": {
		"operator-controller-service." + OLMNamespace + ".svc",
		"operator-controller-service." + OLMNamespace + ".svc.cluster.local",
	},
}

// ensureOLMCertificates makes the CA and the serving certificates unless
// Secrets holding valid ones (not expiring within olmCertRenewAhead, for
// the same names, signed by the CA) are there, and returns the CA in PEM.
// Keeping valid ones makes a second install change nothing: a new CA
// would change catalogd's webhook configuration and what
// operator-controller trusts while they run.
func (c *Cluster) ensureOLMCertificates(ctx context.Context) ([]byte, error) {
	caPEM, caKey, err := c.olmCA(ctx)
	if err != nil {
		return nil, err
	}
	ca, err := parseCertPEM(caPEM)
	if err != nil {
		return nil, err
	}
	for name, dns := range olmServingCerts {
		sec := &corev1.Secret{}
		err := c.Client.Get(ctx, client.ObjectKey{Namespace: OLMNamespace, Name: name}, sec)
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
		if err == nil && bytes.Equal(sec.Data["ca.crt"], caPEM) && servingCertValid(sec.Data["tls.crt"], ca, dns) {
			continue
		}
		certPEM, keyPEM, err := issueCert(dns[0], dns, false, ca, caKey)
		if err != nil {
			return nil, err
		}
		if err := c.applyOLM(ctx, tlsSecret(name, certPEM, keyPEM, caPEM)); err != nil {
			return nil, err
		}
	}
	return caPEM, nil
}

// olmCA reads the CA from its Secret, or makes a new one.
func (c *Cluster) olmCA(ctx context.Context) ([]byte, *ecdsa.PrivateKey, error) {
	sec := &corev1.Secret{}
	err := c.Client.Get(ctx, client.ObjectKey{Namespace: OLMNamespace, Name: olmCASecret}, sec)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, nil, err
	}
	if err == nil {
		cert, certErr := parseCertPEM(sec.Data["tls.crt"])
		key, keyErr := parseKeyPEM(sec.Data["tls.key"])
		if certErr == nil && keyErr == nil && time.Until(cert.NotAfter) > olmCertRenewAhead {
			return sec.Data["tls.crt"], key, nil
		}
	}
	certPEM, keyPEM, err := issueCert("olmv1-ca", nil, true, nil, nil)
	if err != nil {
		return nil, nil, err
	}
	if err := c.applyOLM(ctx, tlsSecret(olmCASecret, certPEM, keyPEM, nil)); err != nil {
		return nil, nil, err
	}
	key, err := parseKeyPEM(keyPEM)
	return certPEM, key, err
}

func servingCertValid(certPEM []byte, ca *x509.Certificate, dns []string) bool {
	cert, err := parseCertPEM(certPEM)
	if err != nil || time.Until(cert.NotAfter) < olmCertRenewAhead || !slices.Equal(cert.DNSNames, dns) {
		return false
	}
	return cert.CheckSignatureFrom(ca) == nil
}

// issueCert makes an ECDSA P-256 key and a certificate: a self-signed CA
// when isCA, else a serving certificate for dns signed by ca.
func issueCert(cn string, dns []string, isCA bool, ca *x509.Certificate, caKey *ecdsa.PrivateKey) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(olmCertLifetime),
		DNSNames:     dns,
	}
	parent, signer := tmpl, key
	if isCA {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	} else {
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		parent, signer = ca, caKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		return nil, nil, fmt.Errorf("certificate %s: %w", cn, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

func parseCertPEM(data []byte) (*x509.Certificate, error) {
	b, _ := pem.Decode(data)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("no PEM certificate")
	}
	return x509.ParseCertificate(b.Bytes)
}

func parseKeyPEM(data []byte) (*ecdsa.PrivateKey, error) {
	b, _ := pem.Decode(data)
	if b == nil {
		return nil, fmt.Errorf("no PEM key")
	}
	return x509.ParseECPrivateKey(b.Bytes)
}

// tlsSecret is a kubernetes.io/tls Secret in OLMNamespace, with ca.crt
// when caPEM is set (cert-manager's layout).
func tlsSecret(name string, certPEM, keyPEM, caPEM []byte) *unstructured.Unstructured {
	data := map[string]any{
		"tls.crt": base64.StdEncoding.EncodeToString(certPEM),
		"tls.key": base64.StdEncoding.EncodeToString(keyPEM),
	}
	if caPEM != nil {
		data["ca.crt"] = base64.StdEncoding.EncodeToString(caPEM)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "Secret",
		"metadata":   map[string]any{"name": name, "namespace": OLMNamespace},
		"type":       string(corev1.SecretTypeTLS),
		"data":       data,
	}}
}

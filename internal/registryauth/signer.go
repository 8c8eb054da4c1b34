package registryauth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
)

// Signer signs the registry's tokens with the key whose certificate is the
// registry's rootcertbundle. The certificate travels in the token's x5c
// header: the registry (distribution v2 and v3) verifies it against its
// bundle and the signature against its key.
type Signer struct {
	key  crypto.Signer
	alg  string
	x5c  []string
	hash crypto.Hash
}

// LoadSigner reads a PEM private key (PKCS#8, SEC 1 EC or PKCS#1 RSA; an
// ECDSA P-256 key or an RSA key) and the PEM certificate of its public key.
func LoadSigner(keyFile, certFile string) (*Signer, error) {
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, err
	}
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, err
	}
	return NewSigner(keyPEM, certPEM)
}

// NewSigner is LoadSigner from the PEM documents themselves.
func NewSigner(keyPEM, certPEM []byte) (*Signer, error) {
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, errors.New("registry token key: no PEM block")
	}
	key, err := parseKey(kb)
	if err != nil {
		return nil, fmt.Errorf("registry token key: %w", err)
	}
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, errors.New("registry token certificate: no CERTIFICATE PEM block")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("registry token certificate: %w", err)
	}
	s := &Signer{key: key, x5c: []string{base64.StdEncoding.EncodeToString(cert.Raw)}, hash: crypto.SHA256}
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		if k.Curve != elliptic.P256() {
			return nil, errors.New("registry token key: an ECDSA key must be P-256 (ES256)")
		}
		if !k.PublicKey.Equal(cert.PublicKey) {
			return nil, errors.New("registry token certificate is not the key's")
		}
		s.alg = "ES256"
	case *rsa.PrivateKey:
		if !k.PublicKey.Equal(cert.PublicKey) {
			return nil, errors.New("registry token certificate is not the key's")
		}
		s.alg = "RS256"
	default:
		return nil, fmt.Errorf("registry token key: %T is neither ECDSA nor RSA", key)
	}
	return s, nil
}

func parseKey(b *pem.Block) (crypto.Signer, error) {
	switch b.Type {
	case "EC PRIVATE KEY":
		return x509.ParseECPrivateKey(b.Bytes)
	case "RSA PRIVATE KEY":
		return x509.ParsePKCS1PrivateKey(b.Bytes)
	case "PRIVATE KEY":
		k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
		if err != nil {
			return nil, err
		}
		s, ok := k.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("%T cannot sign", k)
		}
		return s, nil
	}
	return nil, fmt.Errorf("PEM block %q is not a private key", b.Type)
}

// Claims are the registry token's claims (distribution's ClaimSet).
type Claims struct {
	Issuer     string   `json:"iss"`
	Subject    string   `json:"sub"`
	Audience   string   `json:"aud"`
	Expiration int64    `json:"exp"`
	NotBefore  int64    `json:"nbf"`
	IssuedAt   int64    `json:"iat"`
	JWTID      string   `json:"jti"`
	Access     []Access `json:"access"`
}

// Sign returns the compact JWS of claims.
func (s *Signer) Sign(c Claims) (string, error) {
	if c.Access == nil {
		// distribution reads a missing list as no access too; [] says it.
		c.Access = []Access{}
	}
	header, err := json.Marshal(map[string]any{"typ": "JWT", "alg": s.alg, "x5c": s.x5c})
	if err != nil {
		return "", err
	}
	claims, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	enc := base64.RawURLEncoding
	signingInput := enc.EncodeToString(header) + "." + enc.EncodeToString(claims)
	digest := sha256.Sum256([]byte(signingInput))
	var sig []byte
	switch k := s.key.(type) {
	case *ecdsa.PrivateKey:
		// JWS ES256 is R||S, each 32 bytes, not ASN.1.
		r, ss, err := ecdsa.Sign(rand.Reader, k, digest[:])
		if err != nil {
			return "", err
		}
		sig = make([]byte, 64)
		r.FillBytes(sig[:32])
		ss.FillBytes(sig[32:])
	default:
		if sig, err = s.key.Sign(rand.Reader, digest[:], s.hash); err != nil {
			return "", err
		}
	}
	return signingInput + "." + enc.EncodeToString(sig), nil
}

package image

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"

	"github.com/devloop-dev/devloop/internal/fault"
)

// dockerConfig is the part of a .dockerconfigjson document that matters.
type dockerConfig struct {
	Auths map[string]dockerAuth `json:"auths"`
}

// dockerAuth is one entry of "auths": either "auth" (base64 of
// user:password) or the username and password fields, or tokens.
type dockerAuth struct {
	Auth          string `json:"auth"`
	Username      string `json:"username"`
	Password      string `json:"password"`
	IdentityToken string `json:"identitytoken"`
	RegistryToken string `json:"registrytoken"`
}

// dockerConfigKeychain resolves a registry host to the credentials the
// document holds for it, and to anonymous for any other host.
type dockerConfigKeychain struct {
	byHost map[string]authn.AuthConfig
}

// Resolve returns the credentials for target's registry host, or anonymous.
func (k *dockerConfigKeychain) Resolve(target authn.Resource) (authn.Authenticator, error) {
	if cfg, ok := k.byHost[normalizeRegistryHost(target.RegistryStr())]; ok {
		return authn.FromConfig(cfg), nil
	}
	return authn.Anonymous, nil
}

// KeychainFromDockerConfig returns a keychain of the auths in a
// .dockerconfigjson document (a kubernetes.io/dockerconfigjson Secret).
// Keys may be written as a host ("registry.example:5000"), a URL
// ("https://registry.example") or Docker Hub's legacy
// "https://index.docker.io/v1/"; they match by registry host and port.
// Errors never quote the document: it holds secrets.
func KeychainFromDockerConfig(data []byte) (authn.Keychain, error) {
	var doc dockerConfig
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fault.Permanentf("registry credentials: not a .dockerconfigjson document (want {\"auths\": {...}}): invalid JSON")
	}
	k := &dockerConfigKeychain{byHost: map[string]authn.AuthConfig{}}
	for key, entry := range doc.Auths {
		host := normalizeRegistryHost(key)
		if host == "" {
			return nil, fault.Permanentf("registry credentials: auths key %q names no registry host", key)
		}
		cfg := authn.AuthConfig{
			Username:      entry.Username,
			Password:      entry.Password,
			IdentityToken: entry.IdentityToken,
			RegistryToken: entry.RegistryToken,
		}
		if entry.Auth != "" {
			user, pass, err := decodeAuthField(entry.Auth)
			if err != nil {
				return nil, fault.Permanentf("registry credentials for %s: %v", host, err)
			}
			cfg.Username, cfg.Password = user, pass
		}
		k.byHost[host] = cfg
	}
	return k, nil
}

// decodeAuthField decodes the "auth" field: base64 of "user:password".
func decodeAuthField(auth string) (user, password string, err error) {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(auth))
	if err != nil {
		// Some tools write it unpadded.
		raw, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(strings.TrimSpace(auth), "="))
	}
	if err != nil {
		return "", "", fmt.Errorf(`"auth" is not base64`)
	}
	user, password, ok := strings.Cut(string(raw), ":")
	if !ok {
		return "", "", fmt.Errorf(`"auth" is not base64 of user:password`)
	}
	return user, password, nil
}

// normalizeRegistryHost reduces an auths key or a registry name to the host
// (and port) that go-containerregistry calls the registry: scheme and path
// dropped, lower case, Docker Hub's aliases to index.docker.io.
func normalizeRegistryHost(key string) string {
	host := strings.TrimSpace(key)
	if i := strings.Index(host, "://"); i >= 0 {
		host = host[i+3:]
	}
	host, _, _ = strings.Cut(host, "/")
	host = strings.ToLower(host)
	switch host {
	case "docker.io", "registry-1.docker.io":
		return name.DefaultRegistry
	}
	return host
}

package source

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/fault"
)

// Secret keys, the same as Flux's for git and Kubernetes' for registries,
// so an existing Secret can be reused.
const (
	KeyUsername         = "username"
	KeyPassword         = "password"
	KeyIdentity         = "identity"
	KeyKnownHosts       = "known_hosts"
	KeyDockerConfigJSON = corev1.DockerConfigJsonKey
)

func loadCredentials(ctx context.Context, r client.Reader, namespace string, src v1alpha1.Source) (*Credentials, error) {
	var (
		ref  *v1alpha1.LocalObjectReference
		kind string
		s    subject
	)
	switch {
	case src.Git != nil:
		ref, kind, s = src.Git.SecretRef, "git", subject{src.Name, "git", redactURL(src.Git.URL)}
	case src.OCI != nil:
		ref, kind, s = src.OCI.SecretRef, "oci", subject{src.Name, "oci", src.OCI.Repository}
	default:
		// Flux serves its artifacts unauthenticated inside the cluster.
		return nil, nil
	}
	if ref == nil {
		return nil, nil
	}
	if r == nil {
		return nil, fmt.Errorf("%s: no client to read secret %q", s, ref.Name)
	}
	var secret corev1.Secret
	if err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, &secret); err != nil {
		switch {
		case apierrors.IsNotFound(err):
			return nil, s.permanent("secret %q not found in namespace %q", ref.Name, namespace)
		case apierrors.IsForbidden(err):
			return nil, s.permanent("reading secret %q in namespace %q is forbidden", ref.Name, namespace)
		}
		return nil, s.wrap(fmt.Errorf("reading secret %q: %w", ref.Name, err))
	}
	creds := credentialsFrom(func(key string) ([]byte, bool) {
		v, ok := secret.Data[key]
		return v, ok
	})
	if err := creds.validate(kind); err != nil {
		return nil, s.permanent("secret %q: %v", ref.Name, err)
	}
	creds.Version = secret.ResourceVersion
	return creds, nil
}

// credentialsFrom reads the known keys through get, the one difference
// between a Secret object and a mounted Secret volume.
func credentialsFrom(get func(key string) ([]byte, bool)) *Credentials {
	c := &Credentials{}
	if v, ok := get(KeyUsername); ok {
		c.Username = string(v)
	}
	if v, ok := get(KeyPassword); ok {
		c.Password = string(v)
	}
	c.SSHIdentity, _ = get(KeyIdentity)
	c.KnownHosts, _ = get(KeyKnownHosts)
	c.DockerConfigJSON, _ = get(KeyDockerConfigJSON)
	return c
}

// validate checks that the keys a kind of source needs are there, so a
// broken Secret is reported as such and not as a refusal by the server.
// Messages name keys, never values.
func (c *Credentials) validate(kind string) error {
	switch kind {
	case "oci":
		if len(c.DockerConfigJSON) == 0 {
			return fmt.Errorf("missing key %q", KeyDockerConfigJSON)
		}
		if _, err := parseDockerConfig(c.DockerConfigJSON); err != nil {
			return err
		}
	case "git":
		switch {
		case len(c.SSHIdentity) > 0:
			if len(c.KnownHosts) == 0 {
				return fmt.Errorf("has %q but no %q: SSH without host key verification is refused", KeyIdentity, KeyKnownHosts)
			}
		case c.Username != "" || c.Password != "":
			if c.Username == "" {
				return fmt.Errorf("missing key %q", KeyUsername)
			}
			if c.Password == "" {
				return fmt.Errorf("missing key %q", KeyPassword)
			}
		default:
			return fmt.Errorf("has neither %q and %q nor %q and %q", KeyUsername, KeyPassword, KeyIdentity, KeyKnownHosts)
		}
	}
	return nil
}

func credentialsFromDir(dir string) (*Credentials, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fault.Permanent(fmt.Errorf("credentials: %w", err))
	}
	if !fi.IsDir() {
		return nil, fault.Permanentf("credentials: %s is not a directory", dir)
	}
	var readErr error
	found := false
	creds := credentialsFrom(func(key string) ([]byte, bool) {
		// Secret volumes are symlinks into a timestamped directory;
		// ReadFile follows them.
		b, err := os.ReadFile(filepath.Join(dir, key))
		switch {
		case err == nil:
			found = true
			return b, true
		case !errors.Is(err, os.ErrNotExist):
			readErr = err
		}
		return nil, false
	})
	if readErr != nil {
		return nil, fmt.Errorf("credentials: %w", readErr)
	}
	if !found {
		return nil, fault.Permanentf("credentials: %s holds none of %s", dir,
			strings.Join([]string{KeyUsername, KeyPassword, KeyIdentity, KeyKnownHosts, KeyDockerConfigJSON}, ", "))
	}
	kind := "git"
	if len(creds.DockerConfigJSON) > 0 {
		kind = "oci"
	}
	if err := creds.validate(kind); err != nil {
		return nil, fault.Permanent(fmt.Errorf("credentials in %s: %w", dir, err))
	}
	return creds, nil
}

// dockerConfig is the part of a .dockerconfigjson that matters here.
type dockerConfig struct {
	Auths map[string]authn.AuthConfig `json:"auths"`
}

func parseDockerConfig(b []byte) (*dockerConfig, error) {
	var cfg dockerConfig
	if err := json.Unmarshal(b, &cfg); err != nil {
		// The JSON error could quote the document: say only that it is bad.
		return nil, fmt.Errorf("key %q is not a valid docker config JSON document", KeyDockerConfigJSON)
	}
	return &cfg, nil
}

// dockerKeychain answers credentials from one .dockerconfigjson, matching
// entries the way docker does: by registry host, whatever scheme or path
// the key was written with.
type dockerKeychain struct{ cfg *dockerConfig }

func (k dockerKeychain) Resolve(res authn.Resource) (authn.Authenticator, error) {
	want := normalizeRegistry(res.RegistryStr())
	for key, auth := range k.cfg.Auths {
		if normalizeRegistry(key) == want {
			return authn.FromConfig(auth), nil
		}
	}
	return authn.Anonymous, nil
}

func normalizeRegistry(s string) string {
	s = strings.TrimPrefix(strings.TrimPrefix(s, "https://"), "http://")
	if i := strings.IndexByte(s, '/'); i >= 0 {
		s = s[:i]
	}
	switch s {
	case "docker.io", "registry-1.docker.io", "index.docker.io":
		return "index.docker.io"
	}
	return strings.ToLower(s)
}

// ociAuth picks the registry credentials: a docker config when given, else
// basic auth, else anonymous.
func ociAuth(creds *Credentials) (authn.Keychain, error) {
	switch {
	case creds == nil:
		return nil, nil
	case len(creds.DockerConfigJSON) > 0:
		cfg, err := parseDockerConfig(creds.DockerConfigJSON)
		if err != nil {
			return nil, fault.Permanent(err)
		}
		return dockerKeychain{cfg}, nil
	case creds.Username != "":
		return basicKeychain{authn.FromConfig(authn.AuthConfig{Username: creds.Username, Password: creds.Password})}, nil
	}
	return nil, nil
}

type basicKeychain struct{ auth authn.Authenticator }

func (k basicKeychain) Resolve(authn.Resource) (authn.Authenticator, error) { return k.auth, nil }

package source

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

const (
	testPassword   = "hunter2-Pa55"
	testIdentity   = "-----BEGIN OPENSSH PRIVATE KEY-----\nnot really\n-----END OPENSSH PRIVATE KEY-----\n"
	testKnownHosts = "github.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n"
	testDocker     = `{"auths":{"ghcr.io":{"username":"bot","password":"` + testPassword + `"}}}`
)

func TestLoadCredentials(t *testing.T) {
	r := newFetcher(t,
		secret("https", map[string]string{"username": "bot", "password": testPassword}),
		secret("ssh", map[string]string{"identity": testIdentity, "known_hosts": testKnownHosts}),
		secret("ssh-no-hosts", map[string]string{"identity": testIdentity}),
		secret("user-only", map[string]string{"username": "bot"}),
		secret("password-only", map[string]string{"password": testPassword}),
		secret("empty", map[string]string{"unrelated": "x"}),
		secret("docker", map[string]string{".dockerconfigjson": testDocker}),
		secret("docker-bad", map[string]string{".dockerconfigjson": "{" + testPassword}),
	).Reader
	git := func(secretName string) v1alpha1.Source {
		s := gitSource("https://example.com/x.git", nil)
		if secretName != "" {
			s.Git.SecretRef = &v1alpha1.LocalObjectReference{Name: secretName}
		}
		return s
	}
	oci := func(secretName string) v1alpha1.Source {
		s := ociSource("ghcr.io/team/app", "dev", "", false)
		s.OCI.SecretRef = &v1alpha1.LocalObjectReference{Name: secretName}
		return s
	}
	tests := []struct {
		name   string
		src    v1alpha1.Source
		want   *Credentials
		errors []string
	}{
		{name: "no secretRef", src: git(""), want: nil},
		{name: "flux sources need none", src: fluxSource("GitRepository", "x"), want: nil},
		{name: "https", src: git("https"), want: &Credentials{Username: "bot", Password: testPassword}},
		{name: "ssh", src: git("ssh"), want: &Credentials{SSHIdentity: []byte(testIdentity), KnownHosts: []byte(testKnownHosts)}},
		{name: "docker config", src: oci("docker"), want: &Credentials{DockerConfigJSON: []byte(testDocker)}},
		{name: "missing secret", src: git("absent"), errors: []string{`source "app": git https://example.com/x.git`, `secret "absent" not found in namespace "team-a"`}},
		{name: "ssh without known_hosts", src: git("ssh-no-hosts"), errors: []string{`secret "ssh-no-hosts"`, `no "known_hosts"`, "refused"}},
		{name: "username without password", src: git("user-only"), errors: []string{`secret "user-only"`, `missing key "password"`}},
		{name: "password without username", src: git("password-only"), errors: []string{`secret "password-only"`, `missing key "username"`}},
		{name: "no usable key", src: git("empty"), errors: []string{`secret "empty"`, "has neither"}},
		{name: "oci without .dockerconfigjson", src: oci("https"), errors: []string{`source "local": oci ghcr.io/team/app`, `missing key ".dockerconfigjson"`}},
		{name: "invalid docker config", src: oci("docker-bad"), errors: []string{`secret "docker-bad"`, "not a valid docker config"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := LoadCredentials(context.Background(), r, testNamespace, tt.src)
			if tt.errors != nil {
				expectError(t, err, permanent, tt.errors, testPassword, "not really")
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != nil {
				if got.Version == "" {
					t.Error("credentials do not record the Secret's resourceVersion")
				}
				got.Version = ""
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestCredentialsFromDir(t *testing.T) {
	mount := func(t *testing.T, files map[string]string) string {
		t.Helper()
		dir := t.TempDir()
		// A Secret volume: files are symlinks into a ..data directory.
		data := filepath.Join(dir, "..data")
		if err := os.Mkdir(data, 0o755); err != nil {
			t.Fatal(err)
		}
		for k, v := range files {
			if err := os.WriteFile(filepath.Join(data, k), []byte(v), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join("..data", k), filepath.Join(dir, k)); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	tests := []struct {
		name   string
		files  map[string]string
		want   *Credentials
		errors []string
	}{
		{name: "https", files: map[string]string{"username": "bot", "password": testPassword},
			want: &Credentials{Username: "bot", Password: testPassword}},
		{name: "ssh", files: map[string]string{"identity": testIdentity, "known_hosts": testKnownHosts},
			want: &Credentials{SSHIdentity: []byte(testIdentity), KnownHosts: []byte(testKnownHosts)}},
		{name: "docker config", files: map[string]string{".dockerconfigjson": testDocker},
			want: &Credentials{DockerConfigJSON: []byte(testDocker)}},
		{name: "ssh without known_hosts", files: map[string]string{"identity": testIdentity}, errors: []string{"known_hosts"}},
		{name: "nothing usable", files: map[string]string{"other": "x"}, errors: []string{"holds none of"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CredentialsFromDir(mount(t, tt.files))
			if tt.errors != nil {
				expectError(t, err, permanent, tt.errors, testPassword, "not really")
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	t.Run("missing directory", func(t *testing.T) {
		_, err := CredentialsFromDir(filepath.Join(t.TempDir(), "absent"))
		expectError(t, err, permanent, []string{"credentials"})
	})
}

func TestDockerKeychainMatchesRegistryKeys(t *testing.T) {
	for _, key := range []string{"ghcr.io", "https://ghcr.io", "https://ghcr.io/v1/", "http://GHCR.io"} {
		cfg, err := parseDockerConfig([]byte(`{"auths":{"` + key + `":{"username":"bot","password":"pw"}}}`))
		if err != nil {
			t.Fatal(err)
		}
		repo, _ := name.NewRepository("ghcr.io/team/app")
		auth, err := dockerKeychain{cfg}.Resolve(repo)
		if err != nil {
			t.Fatal(err)
		}
		got, err := auth.Authorization()
		if err != nil {
			t.Fatal(err)
		}
		if got.Username != "bot" || got.Password != "pw" {
			t.Errorf("key %q: got %+v", key, got)
		}
	}
	cfg, _ := parseDockerConfig([]byte(`{"auths":{"index.docker.io/v1/":{"auth":"Ym90OnB3"}}}`))
	repo, _ := name.NewRepository("library/alpine")
	auth, _ := dockerKeychain{cfg}.Resolve(repo)
	if got, _ := auth.Authorization(); got.Username != "bot" || got.Password != "pw" {
		t.Errorf("docker hub: got %+v", got)
	}
	other, _ := name.NewRepository("quay.io/x/y")
	if auth, _ := (dockerKeychain{cfg}).Resolve(other); auth != authn.Anonymous {
		t.Errorf("another registry got credentials")
	}
}

package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// dockerConfig is the part of a docker config file a Secret can use:
// the auths entries, and where credentials kept outside the file are.
type dockerConfig struct {
	Auths       map[string]dockerAuth `json:"auths,omitempty"`
	CredsStore  string                `json:"credsStore,omitempty"`
	CredHelpers map[string]string     `json:"credHelpers,omitempty"`
}

// dockerAuth is one registry's credentials, as docker and the kubelet
// read them.
type dockerAuth struct {
	Username      string `json:"username,omitempty"`
	Password      string `json:"password,omitempty"`
	Auth          string `json:"auth,omitempty"`
	Email         string `json:"email,omitempty"`
	IdentityToken string `json:"identitytoken,omitempty"`
	RegistryToken string `json:"registrytoken,omitempty"`
}

// empty is an entry docker writes when the credentials are in a helper.
func (e dockerAuth) empty() bool {
	return e.Auth == "" && e.Password == "" && e.IdentityToken == "" && e.RegistryToken == ""
}

func basicAuth(user, password string) dockerAuth {
	return dockerAuth{Username: user, Password: password, Auth: base64.StdEncoding.EncodeToString([]byte(user + ":" + password))}
}

// dockerConfigPath is where docker reads its config.
func dockerConfigPath() (string, error) {
	if dir := os.Getenv("DOCKER_CONFIG"); dir != "" {
		return filepath.Join(dir, "config.json"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("finding your docker config: %w; give --docker-config=PATH", err)
	}
	return filepath.Join(home, ".docker", "config.json"), nil
}

// buildDocker makes a kubernetes.io/dockerconfigjson Secret from a docker
// config and/or one --docker-server entry (which wins for its registry).
func (f *secretFlags) buildDocker(ctx context.Context, name string, stdin io.Reader) (*localObject, error) {
	auths := map[string]dockerAuth{}
	if f.dockerConfig != "" {
		path := f.dockerConfig
		if path == defaultDockerConfig {
			var err error
			if path, err = dockerConfigPath(); err != nil {
				return nil, err
			}
		}
		cfg, err := readDockerConfig(path)
		if err != nil {
			return nil, err
		}
		registries := f.registries
		if len(registries) == 0 && f.needed != nil {
			// Only what the environment reads this Secret for.
			var skipped []string
			if registries, skipped = cfg.known(f.needed); len(registries) == 0 {
				return nil, fmt.Errorf("--docker-config: %s has no credentials for %s, the registries the environment reads this Secret for (it has %s); run docker login, or give --docker-server",
					path, strings.Join(skipped, ", "), cfg.hostsList())
			}
			f.skipped = skipped
		}
		if auths, err = cfg.pick(ctx, path, registries); err != nil {
			return nil, err
		}
	}
	if f.dockerServer != "" || f.dockerUser != "" || f.passwordStdin {
		if f.dockerServer == "" || f.dockerUser == "" || !f.passwordStdin {
			return nil, errors.New("--docker-server, --docker-username and --docker-password-stdin go together (the password is read from stdin)")
		}
		password, err := readPassword(stdin)
		if err != nil {
			return nil, err
		}
		auths[f.dockerServer] = basicAuth(f.dockerUser, password)
	}
	data, err := json.Marshal(map[string]any{"auths": auths})
	if err != nil {
		return nil, err
	}
	hosts := slices.Sorted(maps.Keys(auths))
	notes := []string{"registries: " + strings.Join(hosts, ", ")}
	if len(f.skipped) > 0 {
		notes = append(notes, "not in the docker config, left out: "+strings.Join(f.skipped, ", "))
	}
	return newLocalObject("Secret", name, corev1.SecretTypeDockerConfigJson,
		map[string][]byte{corev1.DockerConfigJsonKey: data}, notes...)
}

func readDockerConfig(path string) (*dockerConfig, error) {
	data, err := readLimited(path)
	if err != nil {
		return nil, fmt.Errorf("--docker-config: %w", err)
	}
	cfg := &dockerConfig{}
	if err := json.Unmarshal(data, cfg); err != nil {
		// Not the parser's words: they may quote the file.
		return nil, fmt.Errorf("--docker-config: %s is not a docker config (JSON with auths)", path)
	}
	return cfg, nil
}

// readPassword reads --docker-password-stdin: everything up to EOF, less
// the trailing newline an echo or a password manager adds.
func readPassword(stdin io.Reader) (string, error) {
	if stdin == nil {
		return "", errors.New("--docker-password-stdin: no stdin")
	}
	data, err := io.ReadAll(io.LimitReader(stdin, 64<<10))
	if err != nil {
		return "", fmt.Errorf("--docker-password-stdin: %w", err)
	}
	password := strings.TrimRight(string(data), "\r\n")
	if password == "" {
		return "", errors.New("--docker-password-stdin: stdin was empty")
	}
	return password, nil
}

// registryHostOf is the host[:port] of an auths key, which may be a URL
// (https://host/v1/) or a bare host.
func registryHostOf(key string) string {
	h := strings.ToLower(strings.TrimSpace(key))
	h = strings.TrimPrefix(strings.TrimPrefix(h, "https://"), "http://")
	h, _, _ = strings.Cut(h, "/")
	return h
}

// pick keeps the auths entries of the registries asked for (all when
// none is), resolving the ones whose credentials are in a helper. A
// registry asked for that only a helper knows is asked of the helper.
func (c *dockerConfig) pick(ctx context.Context, path string, registries []string) (map[string]dockerAuth, error) {
	byHost := map[string]string{} // host -> auths key
	for key := range c.Auths {
		byHost[registryHostOf(key)] = key
	}
	keys := slices.Sorted(maps.Keys(c.Auths))
	if len(registries) > 0 {
		keys = nil
		for _, r := range registries {
			host := registryHostOf(r)
			if key, ok := byHost[host]; ok {
				keys = append(keys, key)
			} else if c.helperFor(host) != "" {
				keys = append(keys, host)
			} else {
				return nil, fmt.Errorf("--registry %s: %s has no credentials for it (it has %s); run docker login %s, or give --docker-server",
					r, path, c.hostsList(), host)
			}
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("--docker-config: %s has no auths entries; run docker login first, or pick a credential helper's registry with --registry", path)
	}
	out := map[string]dockerAuth{}
	for _, key := range keys {
		e := c.Auths[key]
		if !e.empty() {
			out[key] = e
			continue
		}
		host := registryHostOf(key)
		helper := c.helperFor(host)
		if helper == "" {
			return nil, fmt.Errorf("--docker-config: the entry for %s in %s holds no credentials and names no credential helper; run docker login %s, or leave it out with --registry", host, path, host)
		}
		resolved, err := runCredentialHelper(ctx, helper, key)
		if err != nil {
			return nil, fmt.Errorf("--docker-config: registry %s: %w; or leave it out with --registry, or give --docker-server", host, err)
		}
		out[key] = resolved
	}
	return out, nil
}

// helperFor is the credential helper docker would ask for host.
func (c *dockerConfig) helperFor(host string) string {
	for k, h := range c.CredHelpers {
		if registryHostOf(k) == host {
			return h
		}
	}
	return c.CredsStore
}

func (c *dockerConfig) hostsList() string {
	var hosts []string
	for k := range c.Auths {
		hosts = append(hosts, registryHostOf(k))
	}
	for k := range c.CredHelpers {
		hosts = append(hosts, registryHostOf(k))
	}
	if len(hosts) == 0 {
		return "none"
	}
	slices.Sort(hosts)
	return strings.Join(slices.Compact(hosts), ", ")
}

// helperName is what a credential helper may be called: its binary is
// docker-credential-<name>, looked up on PATH, so a name must not be a
// path.
var helperName = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// runCredentialHelper asks docker-credential-<helper> for the credentials
// of server, as docker does (`get`, the server on stdin, JSON out).
func runCredentialHelper(ctx context.Context, helper, server string) (dockerAuth, error) {
	if !helperName.MatchString(helper) || strings.HasPrefix(helper, ".") {
		return dockerAuth{}, fmt.Errorf("the credential helper name %q is not a plain name", helper)
	}
	bin := "docker-credential-" + helper
	path, err := exec.LookPath(bin)
	if err != nil {
		return dockerAuth{}, fmt.Errorf("its credentials are in the credential helper %q, and %s is not on PATH", helper, bin)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "get")
	cmd.Stdin = strings.NewReader(server)
	var stdout bytes.Buffer
	cmd.Stdout = &limitedWriter{w: &stdout, n: 64 << 10}
	if err := cmd.Run(); err != nil {
		// On failure a helper prints its error on stdout, not credentials.
		return dockerAuth{}, fmt.Errorf("the credential helper %s failed: %s", bin, helperMessage(stdout.String(), err))
	}
	var out struct {
		Username, Secret string
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil || out.Secret == "" {
		return dockerAuth{}, fmt.Errorf("the credential helper %s returned no credentials", bin)
	}
	if out.Username == "<token>" { // docker's marker for an identity token
		return dockerAuth{IdentityToken: out.Secret}, nil
	}
	return basicAuth(out.Username, out.Secret), nil
}

func helperMessage(s string, err error) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	if line == "" {
		return err.Error()
	}
	if len(line) > 200 {
		line = line[:200] + "…"
	}
	return line
}

// limitedWriter keeps the first n bytes and drops the rest.
type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(len(p), l.n)
		l.n -= k
		if _, err := l.w.Write(p[:k]); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"
)

// AllowedContextsEnv lists the kubeconfig contexts the plugin may touch,
// comma-separated; it overrides the settings file (as an environment
// variable overrides a settings file in Tilt-style setups).
const AllowedContextsEnv = "DEVLOOP_ALLOWED_CONTEXTS"

// Settings is the per-user settings file,
// $XDG_CONFIG_HOME/devloop/config.yaml (~/.config/devloop/config.yaml).
type Settings struct {
	// AllowedContexts are kubeconfig context names or globs ("kind-*",
	// "*"). When set, every other context is refused.
	AllowedContexts []string `json:"allowedContexts,omitempty"`
}

// SettingsPath is where the settings file is read from.
func SettingsPath() string {
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "devloop", "config.yaml")
}

// contextPolicy is the allow-list in force and where it came from.
type contextPolicy struct {
	allowed []string // nil: nothing configured
	from    string
}

// loadContextPolicy reads the environment variable, then the file. With
// nothing configured every context is allowed: the plugin writes only
// annotations on DevEnvironments (which RBAC already guards) and pushes to
// the registry an environment names, and a first-time user should not have
// to write a settings file to try it. Teams that share clusters set a list.
func loadContextPolicy() (contextPolicy, error) {
	if v := strings.TrimSpace(os.Getenv(AllowedContextsEnv)); v != "" {
		return contextPolicy{allowed: splitList(v), from: "$" + AllowedContextsEnv}, nil
	}
	p := SettingsPath()
	if p == "" {
		return contextPolicy{}, nil
	}
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return contextPolicy{}, nil
	}
	if err != nil {
		return contextPolicy{}, fmt.Errorf("reading settings: %w", err)
	}
	var s Settings
	if err := yaml.UnmarshalStrict(data, &s); err != nil {
		return contextPolicy{}, fmt.Errorf("settings file %s: %w (want `allowedContexts: [name, ...]`)", p, err)
	}
	if s.AllowedContexts == nil {
		return contextPolicy{}, nil
	}
	return contextPolicy{allowed: s.AllowedContexts, from: p}, nil
}

// allows says whether the policy lets the plugin touch context name.
func (p contextPolicy) allows(name string) bool {
	if p.allowed == nil {
		return true
	}
	for _, pattern := range p.allowed {
		if ok, err := path.Match(pattern, name); err == nil && ok {
			return true
		}
	}
	return false
}

// checkContextAllowed refuses a context the user did not allow, saying how
// to allow it.
func checkContextAllowed(name string) error {
	p, err := loadContextPolicy()
	if err != nil {
		return err
	}
	if p.allows(name) {
		return nil
	}
	if name == "" {
		return fmt.Errorf("the kubeconfig names no current context, and an allow-list of contexts is configured (%s: %s): pick one with --context", p.from, strings.Join(p.allowed, ", "))
	}
	how := fmt.Sprintf("add %q to allowedContexts in %s", name, p.from)
	if strings.HasPrefix(p.from, "$") {
		how = fmt.Sprintf("add %q to %s (it overrides %s)", name, AllowedContextsEnv, SettingsPath())
	}
	return fmt.Errorf("context %q is not allowed: devloop may touch only %s (from %s). If this is the cluster you mean, %s; otherwise switch with --context or `kubectl config use-context`",
		name, strings.Join(p.allowed, ", "), p.from, how)
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// KnownServersFile records, per allowed context, the API server it was
// first used with: $XDG_CONFIG_HOME/devloop/servers.yaml.
func KnownServersFile() string {
	p := SettingsPath()
	if p == "" {
		return ""
	}
	return filepath.Join(filepath.Dir(p), "servers.yaml")
}

// knownServers is the file's content.
type knownServers struct {
	// Servers maps a context name to the server URL it was first used
	// with.
	Servers map[string]string `json:"servers"`
}

// checkContextServer holds an allowed context to its cluster: with an
// allow-list configured, the server the plugin is about to talk to (host,
// from the resolved REST config) must be the server the context names in
// the kubeconfig (so --server, --cluster or a $KUBECONFIG override cannot
// point an allowed name at another cluster) and the server the context was
// first used with (so another kubeconfig that reuses the name cannot
// either). The first use records it.
func checkContextServer(raw clientcmdapi.Config, contextName, host string) error {
	p, err := loadContextPolicy()
	if err != nil || p.allowed == nil {
		return err
	}
	want := ""
	if c, ok := raw.Contexts[contextName]; ok && c != nil {
		if cl, ok := raw.Clusters[c.Cluster]; ok && cl != nil {
			want = cl.Server
		}
	}
	if want == "" {
		return fmt.Errorf("context %q names no cluster with a server in the kubeconfig; refusing to guess which cluster an allowed context means", contextName)
	}
	if !sameServer(host, want) {
		return fmt.Errorf("refusing server %s: the allowed context %q names the server %s, and --server, --cluster or the kubeconfig points it elsewhere (allowedContexts allows clusters by their context's server, not by the name alone)", host, contextName, want)
	}
	file := KnownServersFile()
	if file == "" {
		return nil
	}
	var known knownServers
	data, err := os.ReadFile(file)
	switch {
	case err == nil:
		if err := yaml.UnmarshalStrict(data, &known); err != nil {
			return fmt.Errorf("known servers file %s: %w", file, err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("reading %s: %w", file, err)
	}
	if rec, ok := known.Servers[contextName]; ok {
		if !sameServer(rec, host) {
			return fmt.Errorf("refusing server %s: context %q was first used with the server %s (recorded in %s); another kubeconfig may reuse the name for another cluster. If the cluster moved, delete its line from %s",
				host, contextName, rec, file, file)
		}
		return nil
	}
	if known.Servers == nil {
		known.Servers = map[string]string{}
	}
	known.Servers[contextName] = host
	out, err := yaml.Marshal(known)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return fmt.Errorf("recording the server of context %q: %w", contextName, err)
	}
	if err := os.WriteFile(file, out, 0o600); err != nil {
		return fmt.Errorf("recording the server of context %q: %w", contextName, err)
	}
	return nil
}

// sameServer compares server URLs, ignoring the case of scheme and host
// and a trailing slash.
func sameServer(a, b string) bool {
	norm := func(s string) string {
		s = strings.TrimSuffix(strings.TrimSpace(s), "/")
		if u, err := url.Parse(s); err == nil && u.Host != "" {
			u.Scheme, u.Host = strings.ToLower(u.Scheme), strings.ToLower(u.Host)
			return u.String()
		}
		return s
	}
	return norm(a) == norm(b)
}

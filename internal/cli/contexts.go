package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

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

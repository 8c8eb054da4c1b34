package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/devloop-dev/devloop/internal/testenv"
)

func writeSettings(t *testing.T, content string) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", dir)
	if content == "" {
		return filepath.Join(dir, "devloop", "config.yaml")
	}
	p := filepath.Join(dir, "devloop", "config.yaml")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestContextPolicy(t *testing.T) {
	cases := []struct {
		name, file, env string
		allowed         []string
		refused         []string
		refusal         string
	}{
		{name: "nothing configured allows every context", allowed: []string{"prod", "kind-dev", ""}},
		{name: "file list", file: "allowedContexts: [kind-dev, minikube]\n", allowed: []string{"kind-dev", "minikube"}, refused: []string{"prod"},
			refusal: `context "prod" is not allowed: devloop may touch only kind-dev, minikube (from %FILE%). If this is the cluster you mean, add "prod" to allowedContexts in %FILE%`},
		{name: "globs", file: "allowedContexts: ['kind-*', 'dev-?']\n", allowed: []string{"kind-a", "dev-1"}, refused: []string{"dev-12", "prod"}},
		{name: "the environment variable overrides the file", file: "allowedContexts: [kind-dev]\n", env: "staging, qa", allowed: []string{"staging", "qa"}, refused: []string{"kind-dev"},
			refusal: `context "kind-dev" is not allowed: devloop may touch only staging, qa (from $DEVLOOP_ALLOWED_CONTEXTS). If this is the cluster you mean, add "kind-dev" to DEVLOOP_ALLOWED_CONTEXTS`},
		{name: "an empty list refuses everything", file: "allowedContexts: []\n", refused: []string{"kind-dev"}},
		{name: "a kubeconfig without a current context", file: "allowedContexts: [kind-dev]\n", refused: []string{""}, refusal: "names no current context"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			file := writeSettings(t, c.file)
			t.Setenv(AllowedContextsEnv, c.env)
			for _, n := range c.allowed {
				if err := checkContextAllowed(n); err != nil {
					t.Errorf("%q refused: %v", n, err)
				}
			}
			for _, n := range c.refused {
				err := checkContextAllowed(n)
				if err == nil {
					t.Errorf("%q allowed", n)
					continue
				}
				if want := strings.ReplaceAll(c.refusal, "%FILE%", file); !strings.Contains(err.Error(), want) {
					t.Errorf("refusal of %q = %q, want it to contain %q", n, err, want)
				}
			}
		})
	}
}

func TestContextPolicyNamesABadFile(t *testing.T) {
	file := writeSettings(t, "allowedContext: [typo]\n")
	t.Setenv(AllowedContextsEnv, "")
	err := checkContextAllowed("kind-dev")
	if err == nil || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), "want `allowedContexts: [name, ...]`") {
		t.Fatalf("got %v", err)
	}
}

// Every command refuses a context outside the allow-list before it
// touches the cluster.
func TestCommandsRefuseContextsNotAllowed(t *testing.T) {
	t.Setenv(AllowedContextsEnv, "kind-*")
	ns := testenv.Namespace(t, k8s, "cli-")
	createEnv(t, ns, "team", teamSpec())
	for _, args := range [][]string{
		{"status", "team"}, {"wait", "team"}, {"trigger", "team", "unit"}, {"cancel", "team", "unit"},
		{"logs", "team", "web"}, {"push", t.TempDir(), "--env", "team", "--source", "app"},
	} {
		r := plugin(t, append(args, "-n", ns)...)
		if r.code != 1 || !strings.Contains(r.err, `context "`+contextName+`" is not allowed`) {
			t.Errorf("%v: want a refusal, got\n%s", args, r)
		}
	}
	if got := annotation(t, ns, "team"); got != "" {
		t.Fatalf("a refused trigger was written: %q", got)
	}
	t.Setenv(AllowedContextsEnv, "kind-*,"+contextName)
	if r := plugin(t, "status", "team", "-n", ns); r.code != 0 {
		t.Fatalf("allowed context refused:\n%s", r)
	}
}

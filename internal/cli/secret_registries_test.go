package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/internal/testfiles"
)

// TestDockerConfigCopiesOnlyWhatTheEnvironmentUses (issue 31, low):
// --docker-config without --registry copies the entries of the registries
// the environment reads the Secret for, no other entry of the developer's
// docker config, and asks no credential helper about the others (here
// one that is not installed, which would fail the command).
func TestDockerConfigCopiesOnlyWhatTheEnvironmentUses(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "cli-")
	createEnv(t, ns, "gpu", fixtureEnv("", "").RegistryCredentials("regcred").
		OCI("app", "sources.test:5000/team/app").SourceSecret("app", "regcred").Spec())
	dir := t.TempDir()
	testfiles.Write(t, dir, map[string]string{"config.json": `{"auths": {
  "registry.test": {"auth": "dGVhbTp0ZWFt"},
  "sources.test:5000": {"username": "team", "password": "team"},
  "personal.test": {"username": "me", "password": "hunter2"},
  "https://index.docker.io/v1/": {}
}, "credsStore": "not-installed"}`})

	r := plugin(t, "secret", "gpu", "regcred", "--docker-config", filepath.Join(dir, "config.json"), "-n", ns)
	expectOutput(t, r, 0, []string{"registries: registry.test, sources.test:5000"}, nil)
	if strings.Contains(r.out+r.err, "personal.test") || strings.Contains(r.out+r.err, "docker-credential") {
		t.Fatalf("another registry was copied or a helper asked:\n%s", r)
	}
	var cfg dockerConfig
	if err := json.Unmarshal(getSecret(t, ns, "regcred").Data[corev1.DockerConfigJsonKey], &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Auths) != 2 || cfg.Auths["registry.test"].Auth == "" || cfg.Auths["sources.test:5000"].Password != "team" {
		t.Fatalf("auths %+v, want registry.test and sources.test:5000 only", cfg.Auths)
	}

	// A Secret the environment reads for no registry: nothing to pick
	// from the docker config without --registry.
	r = plugin(t, "secret", "gpu", "other", "--docker-config", filepath.Join(dir, "config.json"), "-n", ns)
	expectOutput(t, r, 1, nil, []string{"reads it for none", "--registry HOST"})
	// --registry still picks what the developer names.
	r = plugin(t, "secret", "gpu", "other", "--docker-config", filepath.Join(dir, "config.json"), "--registry", "personal.test", "-n", ns)
	expectOutput(t, r, 0, []string{"registries: personal.test"}, nil)
}

func TestRegistriesUsing(t *testing.T) {
	env := referencingEnv().PullPrefix("localhost:30500/team").Obj()
	env.Spec.Sources = append(env.Spec.Sources, v1alpha1.Source{Name: "hub", OCI: &v1alpha1.OCISource{Repository: "library/busybox",
		SecretRef: &v1alpha1.LocalObjectReference{Name: "regcred"}}})
	if got := strings.Join(registriesUsing(env, "regcred"), ","); got != "charts.test,index.docker.io,localhost:30500,registry.test" {
		t.Fatalf("registries %s", got)
	}
	if got := registriesUsing(env, "git-creds"); len(got) != 0 {
		t.Fatalf("a git Secret is read for no registry, got %v", got)
	}
}

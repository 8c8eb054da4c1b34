package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"

	"github.com/devloop-dev/devloop/internal/testfiles"
)

// parseSecret parses args as the secret command's flags.
func parseSecret(t *testing.T, args ...string) *secretFlags {
	t.Helper()
	f := &secretFlags{}
	parseFlags(t, "secret", f.register, args...)
	return f
}

// parseFlags parses args as the flags of the command name, which register
// adds, and returns the flag set: its Args are the positional arguments.
func parseFlags(t *testing.T, name string, register func(*pflag.FlagSet), args ...string) *pflag.FlagSet {
	t.Helper()
	fl := pflag.NewFlagSet(name, pflag.ContinueOnError)
	register(fl)
	if err := fl.Parse(args); err != nil {
		t.Fatal(err)
	}
	return fl
}

// A generic Secret from literals, a named file, a directory and an env
// file (comments skipped, a bare KEY read from the environment, values as
// written).
func TestGenericSecretFromLocalFiles(t *testing.T) {
	dir := testfiles.Tree(t, map[string]string{
		"keys/private.pem": "PRIVATE",
		"certs/ca.crt":     "CA",
		"certs/tls.crt":    "CRT",
		"app.env":          "\uFEFF# comment\n\nDB_USER=dev\nDB_PASS=\"quoted=as-is\"\nFROM_SHELL\n",
	})
	t.Setenv("FROM_SHELL", "shell-value")
	f := parseSecret(t, "--from-literal", "issuer=dev=1", "--from-file", "key.pem="+filepath.Join(dir, "keys/private.pem"),
		"--from-file", filepath.Join(dir, "certs"), "--from-env-file", filepath.Join(dir, "app.env"))
	obj, err := f.build(context.Background(), "app-secrets", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"issuer": "dev=1", "key.pem": "PRIVATE", "ca.crt": "CA", "tls.crt": "CRT",
		"DB_USER": "dev", "DB_PASS": `"quoted=as-is"`, "FROM_SHELL": "shell-value"}
	if len(obj.data) != len(want) {
		t.Fatalf("keys %v, want %d keys", obj.keys, len(want))
	}
	for k, v := range want {
		if string(obj.data[k]) != v {
			t.Errorf("key %s = %q, want %q", k, obj.data[k], v)
		}
	}
	if obj.kind != "Secret" || obj.secretType != corev1.SecretTypeOpaque {
		t.Fatalf("got %s of type %s", obj.kind, obj.secretType)
	}
}

func TestSecretFlagErrors(t *testing.T) {
	dir := testfiles.Tree(t, map[string]string{"a": "x", "bad.env": "OK=1\nNOT_SET_ANYWHERE_42\n"})
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"nothing", nil, "nothing to write"},
		{"both kinds", []string{"--from-literal", "a=b", "--docker-config"}, "write them as two Secrets"},
		{"literal without key", []string{"--from-literal", "hunter2"}, "--from-literal #1: want KEY=VALUE"},
		{"duplicate key", []string{"--from-literal", "a=hunter2", "--from-file", filepath.Join(dir, "a")}, `key "a" is already given by --from-literal #1 (a)`},
		{"bad key", []string{"--from-literal", "a b=hunter2"}, `key "a b" is not a valid Secret key`},
		{"missing file", []string{"--from-file", filepath.Join(dir, "nope")}, "--from-file " + filepath.Join(dir, "nope")},
		{"env line without a variable", []string{"--from-env-file", filepath.Join(dir, "bad.env")}, `bad.env:2: "NOT_SET_ANYWHERE_42" has no value`},
		{"registry without docker config", []string{"--docker-server", "r.test", "--registry", "r.test"}, "--registry picks registries of --docker-config"},
		{"server without password", []string{"--docker-server", "r.test", "--docker-username", "u"}, "go together"},
		{"bad name", []string{"--from-literal", "a=b"}, `NAME "Bad_Name" is not a valid Secret name`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			name := "ok"
			if c.name == "bad name" {
				name = "Bad_Name"
			}
			_, err := parseSecret(t, c.args...).build(context.Background(), name, strings.NewReader(""))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want it to contain %q", err, c.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("the error quotes a value: %v", err)
			}
		})
	}
}

// fakeHelper puts docker-credential-fake on PATH: it knows one registry
// and fails for others as real helpers do (message on stdout, exit 1).
func fakeHelper(t *testing.T) {
	t.Helper()
	bin := t.TempDir()
	script := `#!/bin/sh
read server
case "$server" in
  helper.test:5000) echo '{"ServerURL":"helper.test:5000","Username":"robot","Secret":"from-helper"}' ;;
  token.test) echo '{"ServerURL":"token.test","Username":"<token>","Secret":"identity"}' ;;
  *) echo "credentials not found in native keychain"; exit 1 ;;
esac
`
	if err := os.WriteFile(filepath.Join(bin, "docker-credential-fake"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// dockerAuths decodes the .dockerconfigjson of a built Secret.
func dockerAuths(t *testing.T, obj *localObject) map[string]dockerAuth {
	t.Helper()
	var cfg struct {
		Auths map[string]dockerAuth `json:"auths"`
	}
	raw := obj.data[corev1.DockerConfigJsonKey]
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	var top map[string]json.RawMessage
	_ = json.Unmarshal(raw, &top)
	if len(top) != 1 {
		t.Fatalf("the Secret keeps more than auths: %s", raw)
	}
	return cfg.Auths
}

// A docker config keeps only its auths entries; an entry docker left empty
// because a helper holds the credentials is filled by asking the helper;
// --registry keeps only the registries named (a helper-only registry
// included); a registry the helper cannot answer for fails naming it.
func TestDockerConfigSecret(t *testing.T) {
	fakeHelper(t)
	dir := t.TempDir()
	config := filepath.Join(dir, "config.json")
	testfiles.Write(t, dir, map[string]string{"config.json": `{
  "auths": {
    "https://plain.test/v1/": {"auth": "dXNlcjpwYXNz"},
    "helper.test:5000": {},
    "other.test": {"username": "u", "password": "p"}
  },
  "credsStore": "fake",
  "credHelpers": {"token.test": "fake"},
  "proxies": {"default": {"httpProxy": "http://proxy.test:3128"}},
  "HttpHeaders": {"X-Meta": "x"}
}`})
	ctx := context.Background()

	obj, err := parseSecret(t, "--docker-config="+config).build(ctx, "regcred", nil)
	if err != nil {
		t.Fatal(err)
	}
	if obj.secretType != corev1.SecretTypeDockerConfigJson || strings.Join(obj.keys, ",") != corev1.DockerConfigJsonKey {
		t.Fatalf("got type %s keys %v", obj.secretType, obj.keys)
	}
	auths := dockerAuths(t, obj)
	if len(auths) != 3 {
		t.Fatalf("auths %v: want the three auths entries only", auths)
	}
	if auths["https://plain.test/v1/"].Auth != "dXNlcjpwYXNz" || auths["other.test"].Password != "p" {
		t.Fatalf("entries not kept as written: %+v", auths)
	}
	if h := auths["helper.test:5000"]; h.Username != "robot" || h.Password != "from-helper" || h.Auth == "" {
		t.Fatalf("the helper's credentials were not filled in: %+v", h)
	}
	if strings.Join(obj.notes, "") != "registries: helper.test:5000, https://plain.test/v1/, other.test" {
		t.Fatalf("notes %v", obj.notes)
	}

	// --registry, matched by host whatever the key's form; a helper-only
	// registry gets an identity token.
	obj, err = parseSecret(t, "--docker-config="+config, "--registry", "plain.test", "--registry", "token.test").build(ctx, "regcred", nil)
	if err != nil {
		t.Fatal(err)
	}
	auths = dockerAuths(t, obj)
	if len(auths) != 2 || auths["token.test"].IdentityToken != "identity" || auths["https://plain.test/v1/"].Auth == "" {
		t.Fatalf("auths %+v", auths)
	}

	// With a credsStore every registry is the store's to answer; without
	// one, a registry the file does not name is refused with what it has.
	_, err = parseSecret(t, "--docker-config="+config, "--registry", "unknown.test").build(ctx, "regcred", nil)
	if want := "registry unknown.test: the credential helper docker-credential-fake failed: credentials not found"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want %q", err, want)
	}
	testfiles.Write(t, dir, map[string]string{"plain.json": `{"auths": {"a.test": {"auth": "YTpi"}}, "credHelpers": {"h.test": "fake"}}`})
	_, err = parseSecret(t, "--docker-config="+filepath.Join(dir, "plain.json"), "--registry", "unknown.test").build(ctx, "regcred", nil)
	if want := "--registry unknown.test: " + filepath.Join(dir, "plain.json") + " has no credentials for it (it has a.test, h.test)"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want %q", err, want)
	}

	// A helper that is not installed, and one that does not know the
	// registry: both fail naming the registry and the helper.
	testfiles.Write(t, dir, map[string]string{
		"absent.json":   `{"auths": {"helper.test:5000": {}}, "credsStore": "not-installed"}`,
		"unknown.json":  `{"auths": {"unknown.test": {}}, "credsStore": "fake"}`,
		"nohelper.json": `{"auths": {"empty.test": {}}}`,
		"path.json":     `{"auths": {"x.test": {}}, "credsStore": "../../tmp/evil"}`,
	})
	for file, want := range map[string]string{
		"absent.json":   `registry helper.test:5000: its credentials are in the credential helper "not-installed", and docker-credential-not-installed is not on PATH`,
		"unknown.json":  "registry unknown.test: the credential helper docker-credential-fake failed: credentials not found in native keychain",
		"nohelper.json": "the entry for empty.test in " + filepath.Join(dir, "nohelper.json") + " holds no credentials and names no credential helper",
		"path.json":     `the credential helper name "../../tmp/evil" is not a plain name`,
	} {
		_, err := parseSecret(t, "--docker-config="+filepath.Join(dir, file)).build(ctx, "regcred", nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", file, err, want)
		}
	}
}

// --docker-server with the password from stdin (its trailing newline
// dropped), and with a docker config: the explicit entry wins for its
// registry. $DOCKER_CONFIG is where --docker-config looks by default.
func TestDockerServerSecret(t *testing.T) {
	dir := testfiles.Tree(t, map[string]string{"config.json": `{"auths": {"a.test": {"auth": "YTpi"}, "b.test": {"auth": "Yjpj"}}}`})
	t.Setenv("DOCKER_CONFIG", dir)
	f := parseSecret(t, "--docker-config", "--docker-server", "b.test", "--docker-username", "ci", "--docker-password-stdin")
	obj, err := f.build(context.Background(), "regcred", strings.NewReader("s3cret\n"))
	if err != nil {
		t.Fatal(err)
	}
	auths := dockerAuths(t, obj)
	if auths["a.test"].Auth != "YTpi" {
		t.Fatalf("a.test from the default config lost: %+v", auths)
	}
	if b := auths["b.test"]; b.Username != "ci" || b.Password != "s3cret" || b.Auth != "Y2k6czNjcmV0" {
		t.Fatalf("b.test: %+v", b)
	}
	_, err = parseSecret(t, "--docker-server", "b.test", "--docker-username", "ci", "--docker-password-stdin").
		build(context.Background(), "regcred", strings.NewReader("\n"))
	if err == nil || !strings.Contains(err.Error(), "stdin was empty") {
		t.Fatalf("empty password: %v", err)
	}
}

// --docker-config takes an optional value, so a path after a space is an
// argument: it is found wherever the flag stood.
func TestDockerConfigPathAfterASpace(t *testing.T) {
	cases := []struct {
		args       []string
		env, name  string
		config     string
		wantErrors bool
	}{
		{[]string{"gpu", "regcred", "--docker-config", "/c.json"}, "gpu", "regcred", "/c.json", false},
		{[]string{"--docker-config", "/c.json", "gpu", "regcred"}, "gpu", "regcred", "/c.json", false},
		{[]string{"gpu", "--docker-config", "/c.json", "regcred"}, "gpu", "regcred", "/c.json", false},
		{[]string{"gpu", "regcred", "--docker-config=/c.json"}, "gpu", "regcred", "/c.json", false},
		{[]string{"gpu", "regcred", "--docker-config", "--registry", "r.test"}, "gpu", "regcred", defaultDockerConfig, false},
		{[]string{"gpu", "--docker-config", "regcred"}, "gpu", "regcred", defaultDockerConfig, false},
		{[]string{"gpu", "regcred", "extra", "--docker-config"}, "", "", "", true},
		{[]string{"gpu", "regcred", "extra", "--from-literal", "a=b"}, "", "", "", true},
	}
	for _, c := range cases {
		f := &secretFlags{}
		fl := parseFlags(t, "secret", f.register, c.args...)
		env, name, err := f.positional(fl.Args())
		if c.wantErrors {
			if err == nil {
				t.Errorf("%v: no error", c.args)
			}
			continue
		}
		if err != nil || env != c.env || name != c.name || f.dockerConfig != c.config {
			t.Errorf("%v: env %q name %q config %q err %v", c.args, env, name, f.dockerConfig, err)
		}
	}
}

package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/devloop-dev/devloop/internal/testfiles"
)

// fakeEnv is a process environment for --set-env.
func fakeEnv(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

// Later wins: files in command-line order (an --optional-file between two
// --from-file keeps its place), then --set, then --set-env; maps merge key
// by key, lists are replaced; --set types as Helm does; an env var wins
// over its default, and the default is used when it is unset; an unset
// variable without a default leaves what a file gave.
func TestSettingsLayering(t *testing.T) {
	dir := testfiles.Tree(t, map[string]string{
		"values.yaml":        "image: {registry: shared.test, tag: v1}\nreplicas: 1\nlist: [a, b]\nversion: 1.10\nbig: 12345678901234567890\n",
		"tilt-settings.yaml": "image: {registry: mine.test}\nlist: [c]\nfeature: {enabled: false}\n",
		"last.yaml":          "replicas: 3\n",
	})
	p := func(name string) string { return filepath.Join(dir, name) }
	f := parseSettings(t,
		"--from-file", p("values.yaml"), "--optional-file", p("tilt-settings.yaml"), "--optional-file", p("missing.yaml"), "--from-file", p("last.yaml"),
		"--set", "replicas=5", "--set", "feature.enabled=true", "--set", "zip=01234", "--set", "image.tag=v2", "--set", "nothing=null",
		"--set-env", "image.registry=REGISTRY", "--set-env", "image.tag=TAG:v3", "--set-env", "port=PORT:8080", "--set-env", "list=UNSET_LIST",
	)
	obj, err := f.build("dev-settings", fakeEnv(map[string]string{"REGISTRY": "env.test:5000"}))
	if err != nil {
		t.Fatal(err)
	}
	if obj.kind != "ConfigMap" || obj.secretType != "" || strings.Join(obj.keys, ",") != settingsKey {
		t.Fatalf("want a ConfigMap with key %s, got %s %q keys %v", settingsKey, obj.kind, obj.secretType, obj.keys)
	}
	got := string(obj.data[settingsKey])
	want := `big: 12345678901234567890
feature:
  enabled: true
image:
  registry: env.test:5000
  tag: v3
list:
- c
nothing: null
port: 8080
replicas: 5
version: 1.1
zip: "01234"
`
	if got != want {
		t.Fatalf("merged values:\n%s\nwant:\n%s", got, want)
	}
	notes := strings.Join(obj.notes, "\n")
	for _, n := range []string{
		"skipped --optional-file " + p("missing.yaml") + ": it does not exist",
		"image.registry from $REGISTRY",
		"image.tag: $TAG is not set, the default is used",
		"list: $UNSET_LIST is not set, the value from the files or --set stands",
		"sets big, feature.enabled, image.registry, image.tag, list, nothing, port, replicas, version, zip",
	} {
		if !strings.Contains(notes, n) {
			t.Errorf("notes lack %q:\n%s", n, notes)
		}
	}
	if strings.Contains(notes, "env.test") || strings.Contains(notes, "v3") {
		t.Errorf("notes show a value:\n%s", notes)
	}
	// The same flags give the same bytes: an unchanged write is a no-op.
	again, err := f.build("dev-settings", fakeEnv(map[string]string{"REGISTRY": "env.test:5000"}))
	if err != nil || string(again.data[settingsKey]) != got {
		t.Fatalf("second build differs (%v):\n%s", err, again.data[settingsKey])
	}
	var parsed map[string]any
	if err := yaml.Unmarshal(obj.data[settingsKey], &parsed); err != nil {
		t.Fatalf("written values do not parse: %v", err)
	}
}

// parseSettings parses args as the settings command's flags.
func parseSettings(t *testing.T, args ...string) *settingsFlags {
	t.Helper()
	f := &settingsFlags{}
	parseFlags(t, "settings", f.register, args...)
	return f
}

// Bad settings fail before anything is written, naming the flag and never
// quoting a value.
func TestSettingsErrors(t *testing.T) {
	dir := testfiles.Tree(t, map[string]string{
		"list.yaml":   "- token-in-a-list\n",
		"broken.yaml": "a: b\n  c: hunter2: x\n",
	})
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"nothing", nil, "nothing to write"},
		{"unset variable without default", []string{"--set-env", "ngc.apiKey=NGC_API_KEY"}, "--set-env ngc.apiKey=NGC_API_KEY: $NGC_API_KEY is not set, there is no default (ngc.apiKey=NGC_API_KEY:DEFAULT), and no file or --set gives ngc.apiKey"},
		{"bad variable name", []string{"--set-env", "a=1BAD"}, `"1BAD" is not an environment variable name`},
		{"set without =", []string{"--set", "hunter2"}, "--set (no '='): want PATH=VALUE"},
		{"set with a bad path", []string{"--set", "a..b=hunter2"}, "--set a..b=…: want PATH=VALUE"},
		{"missing file", []string{"--from-file", filepath.Join(dir, "nope.yaml")}, "--from-file " + filepath.Join(dir, "nope.yaml") + ": open"},
		{"not a map", []string{"--from-file", filepath.Join(dir, "list.yaml")}, "list.yaml: not a YAML map of values"},
		{"not YAML", []string{"--optional-file", filepath.Join(dir, "broken.yaml")}, "--optional-file " + filepath.Join(dir, "broken.yaml") + ": not valid YAML (line 2)"},
		{"bad key", []string{"--key", "a/b", "--set", "a=1"}, `--key "a/b"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseSettings(t, c.args...).build("s", fakeEnv(nil))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want it to contain %q", err, c.want)
			}
			if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "token-in-a-list") {
				t.Fatalf("the error quotes a value: %v", err)
			}
		})
	}
}

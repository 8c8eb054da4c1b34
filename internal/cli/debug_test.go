package cli

import (
	"strings"
	"testing"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
)

// debugSpec is teamSpec with web's image built by a run step and a
// second component, api, with two such images.
func debugSpec() v1alpha1.DevEnvironmentSpec {
	spec := teamSpec()
	run := &v1alpha1.BuildRun{Image: "golang:1.25", Command: []string{"go", "build", "-o", "bin/", "./..."}}
	spec.Components[1].Images[0].Run = run
	spec.Components = append(spec.Components, v1alpha1.Component{Name: "api",
		Images: []v1alpha1.ImageSpec{
			{Name: "server", Source: "app", Run: run, Layers: []v1alpha1.LayerMapping{{From: "bin/server", To: "/server"}}},
			{Name: "migrate", Source: "app", Run: run, Layers: []v1alpha1.LayerMapping{{From: "bin/migrate", To: "/migrate"}}},
		},
		Manifests: &v1alpha1.ManifestsSpec{Source: "app", Paths: []string{"api"}}})
	return spec
}

// TestDebugWritesTheDebugAnnotation: debug adds component/image (the
// component's only run-step image when IMAGE is left out) and says how
// to attach (--no-forward: without waiting); debug again changes nothing; --off removes only its entry.
func TestDebugWritesTheDebugAnnotation(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "cli-")
	createEnv(t, ns, "team", debugSpec())
	annotation := func() string { return getEnv(t, ns, "team").Annotations[v1alpha1.DebugAnnotation] }

	r := plugin(t, "debug", "team", "web", "--no-forward", "-n", ns)
	if r.code != 0 || annotation() != "web/web" {
		t.Fatalf("debug web: %s; annotation %q, want web/web", r, annotation())
	}
	for _, want := range []string{"devenvironment/team: web/web in debug mode", "dlv connect localhost:40000", `"mode": "remote"`} {
		if !strings.Contains(r.out, want) {
			t.Errorf("debug output lacks %q: %s", want, r)
		}
	}
	if r = plugin(t, "debug", "team", "api/server", "--no-forward", "-n", ns); r.code != 0 || annotation() != "api/server,web/web" {
		t.Fatalf("debug api/server: %s; annotation %q", r, annotation())
	}
	if r = plugin(t, "debug", "team", "api/server", "--no-forward", "-n", ns); r.code != 0 || annotation() != "api/server,web/web" {
		t.Fatalf("debug api/server again: %s; annotation %q", r, annotation())
	}
	r = plugin(t, "debug", "team", "web", "--off", "-n", ns)
	if r.code != 0 || annotation() != "api/server" || !strings.Contains(r.out, "web/web back to the normal build") {
		t.Fatalf("debug web --off: %s; annotation %q, want api/server", r, annotation())
	}
	if r = plugin(t, "debug", "team", "api/server", "--off", "-n", ns); r.code != 0 {
		t.Fatalf("debug api/server --off: %s", r)
	}
	if _, ok := getEnv(t, ns, "team").Annotations[v1alpha1.DebugAnnotation]; ok {
		t.Fatal("--off of the last entry leaves the annotation in place")
	}
}

// TestDebugRefusesWhatHasNoRunStep: unknown components and images, an
// image without a run step and a component with several such images
// and no IMAGE are refused naming the candidates; nothing is written.
func TestDebugRefusesWhatHasNoRunStep(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "cli-")
	spec := debugSpec()
	spec.Components[1].Images[0].Run = nil
	createEnv(t, ns, "team", spec)
	expectRefusals(t, ns, []refusal{
		{[]string{"debug", "team", "nope"}, `devenvironment/team has no component "nope"`},
		{[]string{"debug", "team", "web"}, "component web: say which image, COMPONENT/IMAGE: it has no image with a run step (images[].run)"},
		{[]string{"debug", "team", "api"}, "component api: say which image, COMPONENT/IMAGE: its images with a run step are server, migrate"},
		{[]string{"debug", "team", "api/web"}, `component api has no image "web" with a run step: its images with a run step are server, migrate`},
		{[]string{"debug", "team"}, "want ENV and COMPONENT[/IMAGE]"},
	})
	if _, ok := getEnv(t, ns, "team").Annotations[v1alpha1.DebugAnnotation]; ok {
		t.Fatal("a refused debug wrote the annotation")
	}
}

package cli

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/internal/testregistry"
	"github.com/devloop-dev/devloop/test/builder"
)

// onDemandEnv is teamEnv with three more components: kwok (on demand,
// labelled sim), monitoring (on demand, labelled obs) depending on kwok,
// and web labelled core.
func onDemandEnv(ns, name string) *builder.EnvSpec {
	b := teamEnv(ns, name)
	web := &b.Obj().Spec.Components[1]
	builder.Labels("core")(web)
	return b.Components(
		builder.Component("kwok", builder.OnDemand(), builder.Labels("sim"), builder.ManifestsOf("upstream", "kwok")),
		builder.Component("monitoring", builder.OnDemand(), builder.Labels("obs"), builder.DependsOn("kwok"),
			builder.ManifestsOf("upstream", "monitoring")),
	)
}

// onDemandSpec is onDemandEnv's spec.
func onDemandSpec() v1alpha1.DevEnvironmentSpec { return onDemandEnv("", "").Spec() }

// TestUpAndDownWriteTheUpAnnotation: up adds the named on-demand
// component and those it depends on; -l selects by label; up again
// changes nothing; down removes only what it names.
func TestUpAndDownWriteTheUpAnnotation(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "cli-")
	createEnv(t, ns, "team", onDemandSpec())

	r := plugin(t, "up", "team", "monitoring", "-n", ns)
	if r.code != 0 {
		t.Fatalf("up: %s", r)
	}
	if got := getEnv(t, ns, "team").Annotations[v1alpha1.UpAnnotation]; got != "kwok,monitoring" {
		t.Fatalf("up monitoring: annotation %q, want kwok,monitoring (its on-demand dependency too)", got)
	}
	if !strings.Contains(r.out, "devenvironment/team up: kwok, monitoring") {
		t.Fatalf("up output: %s", r)
	}

	r = plugin(t, "down", "team", "monitoring", "-n", ns)
	if r.code != 0 {
		t.Fatalf("down: %s", r)
	}
	if got := getEnv(t, ns, "team").Annotations[v1alpha1.UpAnnotation]; got != "kwok" {
		t.Fatalf("down monitoring: annotation %q, want kwok", got)
	}

	r = plugin(t, "up", "team", "-l", "sim", "-n", ns)
	if r.code != 0 || getEnv(t, ns, "team").Annotations[v1alpha1.UpAnnotation] != "kwok" {
		t.Fatalf("up -l sim (already up): %s; annotation %q", r, getEnv(t, ns, "team").Annotations[v1alpha1.UpAnnotation])
	}

	// down kwok takes monitoring, which depends on it, down too.
	if r = plugin(t, "up", "team", "monitoring", "-n", ns); r.code != 0 {
		t.Fatalf("up: %s", r)
	}
	r = plugin(t, "down", "team", "kwok", "-n", ns)
	if r.code != 0 || !strings.Contains(r.out, "devenvironment/team down: kwok, monitoring") {
		t.Fatalf("down: %s", r)
	}
	if _, ok := getEnv(t, ns, "team").Annotations[v1alpha1.UpAnnotation]; ok {
		t.Fatal("down of the last one leaves the annotation in place")
	}
}

// TestUpRefusesWhatIsNotOnDemand: unknown components, components not on
// demand and labels selecting no on-demand component are refused naming
// the on-demand ones, and nothing is written.
func TestUpRefusesWhatIsNotOnDemand(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "cli-")
	createEnv(t, ns, "team", onDemandSpec())
	expectRefusals(t, ns, []refusal{
		{[]string{"up", "team", "nope"}, `devenvironment/team has no component "nope": its on-demand components are kwok, monitoring`},
		{[]string{"up", "team", "web"}, "component web of devenvironment/team is not on demand (onDemand: true): its on-demand components are kwok, monitoring"},
		{[]string{"down", "team", "crds"}, "component crds of devenvironment/team is not on demand"},
		{[]string{"up", "team", "-l", "core"}, `no on-demand component of devenvironment/team has the label "core": its on-demand components are kwok, monitoring`},
		{[]string{"up", "team"}, "want ENV and at least one COMPONENT (or -l LABEL)"},
	})
	if _, ok := getEnv(t, ns, "team").Annotations[v1alpha1.UpAnnotation]; ok {
		t.Fatal("a refused up wrote the annotation")
	}
}

// TestStatusSelectsByLabel: status -l shows only the components and
// suites with the label, and a label nothing has is an error naming those
// in use.
func TestStatusSelectsByLabel(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "cli-")
	createEnv(t, ns, "team", onDemandSpec())

	r := plugin(t, "status", "team", "-l", "core", "-n", ns, "-o", "json")
	if r.code != 0 {
		t.Fatalf("status -l core: %s", r)
	}
	var v StatusView
	if err := json.Unmarshal([]byte(r.out), &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Components) != 1 || v.Components[0].Name != "web" || len(v.Tests) != 0 {
		t.Fatalf("status -l core: components %v, tests %v; want only web", v.Components, v.Tests)
	}

	r = plugin(t, "status", "team", "-l", "e2e", "-n", ns)
	if r.code != 0 || !strings.Contains(r.out, "smoke") || strings.Contains(r.out, "unit") || strings.Contains(r.out, "kwok") {
		t.Fatalf("status -l e2e shows the suites e2e and smoke only: %s", r)
	}

	r = plugin(t, "status", "team", "-l", "nope", "-n", ns)
	if r.code == 0 || !strings.Contains(r.err, "-l nope: no component or test suite of devenvironment/team has that label; labels in use: core, e2e, obs, sim") {
		t.Fatalf("status -l nope: %s", r)
	}
}

// TestPushWaitsNotForComponentsTurnedOff: a push does not wait for
// components the operator leaves Disabled, nor for those depending on
// one (Blocked), until they are brought up.
func TestPushWaitsNotForComponentsTurnedOff(t *testing.T) {
	env := onDemandEnv("", "").Obj()
	env.Spec.Components[0].Enabled = ptr.To(false) // crds off: web is Blocked
	if got := affectedComponents(env, "upstream"); len(got) != 0 {
		t.Fatalf("upstream with crds off and kwok, monitoring not up: %v, want none", got)
	}
	env.Spec.Components[0].Enabled = nil
	env.Annotations = map[string]string{v1alpha1.UpAnnotation: "kwok"}
	if got, want := affectedComponents(env, "upstream"), []string{"crds", "web", "kwok"}; !slices.Equal(got, want) {
		t.Fatalf("upstream with kwok up: %v, want %v", got, want)
	}
}

// TestLogsSelectsComponentsByLabel: logs -l reads the pods of every
// component with the label, together; a label no component has is an
// error naming those in use.
func TestLogsSelectsComponentsByLabel(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "cli-")
	spec := onDemandSpec()
	spec.Components[0].Labels = []string{"core"}
	createEnv(t, ns, "team", spec)
	for _, name := range []string{"crds", "web", "kwok"} {
		labels := map[string]string{"app": name}
		create(t,
			&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: name, Image: "registry.test/" + name}}}},
			}},
			pod(ns, name+"-a", labels, name),
		)
	}
	playOperator(t, ns, "team", func(env *v1alpha1.DevEnvironment) {
		env.Status.Components = nil
		for _, name := range []string{"crds", "web", "kwok"} {
			env.Status.Components = append(env.Status.Components, v1alpha1.ComponentStatus{Name: name, Phase: v1alpha1.PhaseReady,
				Inventory: []v1alpha1.ObjectRef{{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: ns, Name: name}}})
		}
	})
	r := logsPlugin(t, &fakeLogs{}, "logs", "team", "-l", "core", "-n", ns)
	want := "[crds-a/crds] crds-a/crds line 1\n[crds-a/crds] crds-a/crds line 2\n" +
		"[web-a/web] web-a/web line 1\n[web-a/web] web-a/web line 2\n"
	if r.code != 0 || r.out != want {
		t.Fatalf("logs -l core: got\n%s\nwant\n%s", r, want)
	}
	r = logsPlugin(t, &fakeLogs{}, "logs", "team", "-l", "nope", "-n", ns)
	if r.code == 0 || !strings.Contains(r.err, "-l nope: no component of devenvironment/team has that label; labels in use: core, e2e, obs, sim") {
		t.Fatalf("logs -l nope: %s", r)
	}
	r = logsPlugin(t, &fakeLogs{}, "logs", "team", "web", "-l", "core", "-n", ns)
	if r.code == 0 || !strings.Contains(r.err, "with -l core, want ENV only") {
		t.Fatalf("logs team web -l core: %s", r)
	}
}

// TestUpWaitAndPushSelectAgainstTheOperator, with the real operator and
// registry: an on-demand component is Disabled and a push does not wait
// for it; push -l follows only the labelled components; up --wait
// follows it until the operator built it and it is Ready; down turns it
// off again.
func TestUpWaitAndPushSelectAgainstTheOperator(t *testing.T) {
	host := testregistry.Start(t)
	ns := operatorNamespace(t)
	name := uniqueName("ondemand")
	spec := pushedSpec(host, name+"-src")
	// Images only (the shared namespace holds other tests' manifests):
	// web labelled core, other not, extra on demand.
	imageOnly := func(component string) v1alpha1.Component {
		return v1alpha1.Component{Name: component, Images: []v1alpha1.ImageSpec{{Name: name + "-" + component, Source: "app",
			Layers: []v1alpha1.LayerMapping{{From: "site", To: "/srv/site"}}}}}
	}
	web, other, extra := imageOnly("web"), imageOnly("other"), imageOnly("extra")
	web.Labels, extra.OnDemand = []string{"core"}, true
	spec.Components = []v1alpha1.Component{web, other, extra}
	createEnv(t, ns, name, spec)
	dir := appTree(t, "<h1>v1</h1>")

	r := plugin(t, "push", dir, "--env", name, "--source", "app", "-n", ns, "-l", "nope")
	if r.code == 0 || !strings.Contains(r.err, "-l nope: no component of devenvironment/"+name+" has that label; labels in use: core") {
		t.Fatalf("push -l nope:\n%s", r)
	}
	r = plugin(t, "push", dir, "--env", name, "--source", "app", "-n", ns, "-l", "core")
	if r.code != 0 || !strings.Contains(r.out, "following web\n") {
		t.Fatalf("push -l core follows web only:\n%s", r)
	}
	waitUntil(t, "extra Disabled", func() bool {
		st := getEnv(t, ns, name).Status.Component("extra")
		return st != nil && st.Phase == v1alpha1.PhaseDisabled
	})

	r = plugin(t, "up", name, "extra", "--wait", "-n", ns)
	if r.code != 0 || !strings.Contains(r.out, "extra Ready in") {
		t.Fatalf("up --wait:\n%s", r)
	}
	env := getEnv(t, ns, name)
	if img := env.Status.Component("extra"); img == nil || len(img.Images) != 1 || img.Images[0].Digest == "" {
		t.Fatalf("extra is Ready without its image built: %+v", img)
	}

	r = plugin(t, "down", name, "extra", "-n", ns)
	if r.code != 0 {
		t.Fatalf("down:\n%s", r)
	}
	waitUntil(t, "extra Disabled after down", func() bool {
		st := getEnv(t, ns, name).Status.Component("extra")
		return st != nil && st.Phase == v1alpha1.PhaseDisabled
	})
}

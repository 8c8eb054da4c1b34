package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/plan"
)

// The fixture trees under testdata/init are shaped like the projects
// devloop replaces (USE-CASES.md), written for these tests:
//   - operator: three cmd mains and a tool and a generator that are not
//     images, a Dockerfile for one of them, a chart whose values spell
//     image references three ways (registry and name apart, repository
//     and tag, a full reference it does not build), one of them read by a
//     custom resource, and CRDs in the chart's crds/ and in a vendored
//     subchart's (GPU Operator, Volcano).
//   - kustomize: a kubebuilder controller deployed by config/default (OCM,
//     an Operator SDK project).
//   - tilt: a main at the module root deployed by a Tiltfile's k8s_yaml,
//     with a live update sync (the Tilt loops devloop replaces).
func fixture(name string) string { return filepath.Join("testdata", "init", name) }

// runInit runs `kubectl devloop init DIR ARGS...` and reads what it wrote
// as a DevEnvironment, strictly (a field the API does not know fails).
func runInit(t *testing.T, dir string, args ...string) (*v1alpha1.DevEnvironment, string) {
	t.Helper()
	g := NewWithT(t)
	var out, errOut bytes.Buffer
	code := Run(context.Background(), append([]string{"init", dir}, args...),
		genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, Options{})
	g.Expect(code).To(Equal(0), "stderr: %s", errOut.String())
	env := &v1alpha1.DevEnvironment{}
	g.Expect(yaml.UnmarshalStrict(out.Bytes(), env)).To(Succeed(), out.String())
	return env, out.String()
}

func componentNamed(env *v1alpha1.DevEnvironment, name string) *v1alpha1.Component {
	for i := range env.Spec.Components {
		if env.Spec.Components[i].Name == name {
			return &env.Spec.Components[i]
		}
	}
	return nil
}

func TestInitOperatorTreeWithChart(t *testing.T) {
	g := NewWithT(t)
	env, text := runInit(t, fixture("operator"), "--name", "widget")

	g.Expect(env.Name).To(Equal("widget"))
	g.Expect(env.Spec.Registry.Prefix).To(Equal("localhost:5000/widget"))
	g.Expect(env.Spec.Sources).To(HaveLen(1))
	g.Expect(env.Spec.Sources[0].OCI.Repository).To(Equal("localhost:5000/widget/src"))

	// CRDs first, then the chart that needs them, which leaves them out:
	// its own and its vendored subchart's, which skipCRDs leaves out too
	// (GPU Operator's node feature discovery).
	g.Expect(env.Spec.Components).To(HaveLen(2))
	crds, chart := env.Spec.Components[0], env.Spec.Components[1]
	g.Expect(crds.Name).To(Equal("widget-crds"))
	g.Expect(crds.Manifests.Paths).To(Equal([]string{"deploy/widget/crds", "deploy/widget/charts/discovery/crds"}))
	g.Expect(chart.Name).To(Equal("widget"))
	g.Expect(chart.DependsOn).To(Equal([]string{"widget-crds"}))
	g.Expect(chart.Helm.Chart).To(Equal(v1alpha1.ChartRef{Source: "src", Path: "deploy/widget"}))
	g.Expect(chart.Helm.SkipCRDs).To(BeTrue())

	// One image per binary the chart deploys, named as the chart names
	// it; hack/lint (a tool) and the ignored generator are not images.
	var names []string
	for _, img := range chart.Images {
		names = append(names, img.Name)
	}
	g.Expect(names).To(Equal([]string{"widget-agent", "widget-operator", "webhook"}))

	// One run step for the tree: every image's is the same, so they share
	// one build cache claim and compile once.
	want := &v1alpha1.BuildRun{
		Image:   "golang:1.25",
		Command: []string{"go", "build", "-o", "out/", "./cmd/agent", "./cmd/operator", "./cmd/webhook"},
		Env:     []v1alpha1.EnvVar{{Name: "CGO_ENABLED", Value: "0"}, {Name: "GOFLAGS", Value: "-trimpath"}},
		Cache:   &v1alpha1.BuildCache{},
	}
	for _, img := range chart.Images {
		g.Expect(img.Run).To(Equal(want), img.Name)
		g.Expect(img.Source).To(Equal("src"))
		g.Expect(img.Base).To(Equal("gcr.io/distroless/static:nonroot"))
	}

	// The Dockerfile says where the operator's binary goes and what else
	// the image holds; the others go to /<binary>.
	g.Expect(chart.Images[1].Layers).To(Equal([]v1alpha1.LayerMapping{
		{From: "out/operator", To: "/usr/local/bin/operator", Mode: "0755"},
		{From: "assets", To: "/opt/widget"},
	}))
	g.Expect(chart.Images[1].Entrypoint).To(Equal([]string{"/usr/local/bin/operator"}))
	g.Expect(chart.Images[0].Layers).To(Equal([]v1alpha1.LayerMapping{{From: "out/agent", To: "/agent", Mode: "0755"}}))

	// The agent reaches the WidgetPolicy, from which the operator starts
	// pods by tag: the revision tag is pushed and written there.
	g.Expect(chart.Images[0].Tags).To(ContainElement("{{ .ShortRevision }}"))
	g.Expect(chart.Images[1].Tags).To(BeEmpty())

	// Each reference in the chart's own spelling, only what is needed:
	// where the image is (the chart's names are the images' already), and
	// the tag where a custom resource reads it (devloop pins what a
	// workload runs to the digest, whatever its tag). The exporter, built
	// by nobody here, is left alone.
	g.Expect(chart.Helm.ImageValues).To(Equal([]v1alpha1.ImageValue{
		{Image: "widget-agent", Path: "agent.repository", From: "Registry"},
		{Image: "widget-agent", Path: "agent.version", From: "Revision"},
		{Image: "widget-operator", Path: "operator.repository", From: "Registry"},
		{Image: "webhook", Path: "webhook.image.repository", From: "Repository"},
	}))

	g.Expect(env.Spec.Tests).To(HaveLen(1))
	g.Expect(env.Spec.Tests[0].Command).To(Equal([]string{"go", "test", "./..."}))
	g.Expect(env.Spec.Tests[0].Image.Ref).To(Equal("golang:1.25"))

	// Comment lines are wrapped at 100 columns: read them unwrapped.
	text = strings.ReplaceAll(text, "\n#   ", " ")
	// Neither the tool nor the generator is compiled for an image.
	g.Expect(text).NotTo(ContainSubstring("lint"))
	g.Expect(text).NotTo(ContainSubstring("internal/gen"))
	// The comments say what was guessed and what was left.
	g.Expect(text).To(ContainSubstring("exporter.image are left as the chart has them"))
	g.Expect(text).To(ContainSubstring("reaches a custom resource"))
	// The chart renders a custom resource its operator reconciles: Ready
	// waits for it, and the draft says how to stop waiting where it cannot
	// turn ready (GPU Operator's ClusterPolicy on a node without a driver).
	g.Expect(text).To(ContainSubstring("chart deploy/widget renders WidgetPolicy"))
	g.Expect(text).To(ContainSubstring("health: {ignore: [{kind: WidgetPolicy, group: widgets.example.com}]}"))
}

func TestInitKustomizeController(t *testing.T) {
	g := NewWithT(t)
	env, text := runInit(t, fixture("kustomize"), "--registry", "registry.example.com/team")

	g.Expect(env.Name).To(Equal("kustomize"))
	g.Expect(env.Spec.Registry).To(Equal(&v1alpha1.RegistrySpec{Prefix: "registry.example.com/team"}))
	// config/default includes ../crd: one component, no separate CRDs.
	g.Expect(env.Spec.Components).To(HaveLen(1))
	c := env.Spec.Components[0]
	g.Expect(c.Name).To(Equal("manager"))
	g.Expect(c.Helm).To(BeNil())
	g.Expect(c.Manifests).To(Equal(&v1alpha1.ManifestsSpec{Source: "src", Paths: []string{"config/default"}}))
	// Named as the kustomized Deployment runs it, so devloop pins that
	// reference to the built digest.
	g.Expect(c.Images).To(HaveLen(1))
	img := c.Images[0]
	g.Expect(img.Name).To(Equal("registry.example.com/gadgets/gadget-controller"))
	g.Expect(img.Run.Image).To(Equal("golang:1.24"))
	g.Expect(img.Run.Command).To(Equal([]string{"go", "build", "-o", "out/", "./cmd"}))
	g.Expect(img.Layers).To(Equal([]v1alpha1.LayerMapping{{From: "out/cmd", To: "/manager", Mode: "0755"}}))
	g.Expect(img.Entrypoint).To(Equal([]string{"/manager"}))
	g.Expect(strings.ReplaceAll(text, "\n#   ", " ")).To(ContainSubstring("config/default includes ../crd"))
}

func TestInitTiltfile(t *testing.T) {
	g := NewWithT(t)
	out := filepath.Join(t.TempDir(), "devenv.yaml")
	_, _ = runInit(t, fixture("tilt"), "-o", out)
	data, err := os.ReadFile(out)
	g.Expect(err).NotTo(HaveOccurred())
	env := &v1alpha1.DevEnvironment{}
	g.Expect(yaml.UnmarshalStrict(data, env)).To(Succeed())

	// The Tiltfile's k8s_yaml, with the image it builds under the name it
	// builds it as, and its live update sync as liveUpdate.
	app := componentNamed(env, "app")
	g.Expect(app).NotTo(BeNil())
	g.Expect(app.Manifests.Paths).To(Equal([]string{"deploy/sprocket.yaml"}))
	g.Expect(app.Images).To(HaveLen(1))
	img := app.Images[0]
	g.Expect(img.Name).To(Equal("registry.example.com/sprocket"))
	g.Expect(img.Run.Command).To(Equal([]string{"go", "build", "-o", "out/", "."}))
	g.Expect(img.Layers).To(Equal([]v1alpha1.LayerMapping{{From: "out/sprocket", To: "/sprocket", Mode: "0755"}}))
	g.Expect(img.LiveUpdate).To(Equal(&v1alpha1.LiveUpdate{Paths: []string{"/sprocket"}}))
	g.Expect(strings.ReplaceAll(string(data), "\n#   ", " ")).To(ContainSubstring("Tiltfile resources sprocket-binary, sprocket"))
}

// TestInitUmbrellaChart: a chart that another chart of the tree depends on
// through file:// (Dynamo's platform chart and its operator chart) is
// deployed with the umbrella, its values under the dependency's key; the
// module lives in a subdirectory.
// TestInitUmbrellaChart: Dynamo's shape. The operator's module is in
// operator/, its chart a subchart of an umbrella; its Dockerfile (in
// operator/, built there) builds the manager and crd-apply in one RUN line
// of a stage FROM the stage that copied the source, and the runtime stage
// copies both binaries and the CRDs the builder only carried over. On
// Dynamo's real tree init built the manager alone and put crd-apply's
// source directory at /crd-apply.
func TestInitUmbrellaChart(t *testing.T) {
	g := NewWithT(t)
	env, _ := runInit(t, fixture("umbrella"))
	g.Expect(env.Spec.Components).To(HaveLen(2))
	g.Expect(env.Spec.Components[0].Manifests.Paths).To(Equal([]string{"operator/config/crd/bases"}))
	c := env.Spec.Components[1]
	g.Expect(c.Name).To(Equal("platform"))
	g.Expect(c.Helm.Chart.Path).To(Equal("helm/platform"))
	g.Expect(c.Images).To(HaveLen(1))
	img := c.Images[0]
	g.Expect(img.Name).To(Equal("platform-operator"))
	// Both binaries of the image compile in its one run step.
	g.Expect(img.Run.Command).To(Equal([]string{"go", "-C", "operator", "build", "-o", "out/", "./cmd", "./cmd/crd-apply"}))
	g.Expect(img.Layers).To(Equal([]v1alpha1.LayerMapping{
		{From: "operator/out/cmd", To: "/manager", Mode: "0755"},
		{From: "operator/out/crd-apply", To: "/crd-apply", Mode: "0755"},
		{From: "operator/config/crd/bases", To: "/opt/platform/crds"},
	}))
	g.Expect(img.Entrypoint).To(Equal([]string{"/manager"}))
	g.Expect(c.Helm.ImageValues).To(Equal([]v1alpha1.ImageValue{
		{Image: "platform-operator", Path: "platform-operator.controllerManager.manager.image.repository", From: "Repository"},
	}))
	g.Expect(env.Spec.Tests[0].Command).To(Equal([]string{"go", "-C", "operator", "test", "./..."}))
}

// TestInitFlatImageKeys: a chart that names six images in flat keys next
// to one registry value (Volcano's basic.scheduler_image_name and
// basic.image_registry); the image named in a key ends in the binary's
// name, and the longest such binary wins (hypernode-controller-manager's
// image is not controller-manager's, agent-scheduler's not scheduler's).
// Six mains do not fit one run.command, so the run step builds ./cmd/...;
// the images, named as the chart names them, need only the registry value
// (helm.imageValues holds 8 entries: a name and a tag per image were 13).
func TestInitFlatImageKeys(t *testing.T) {
	g := NewWithT(t)
	env, _ := runInit(t, fixture("scheduler"))
	g.Expect(env.Spec.Components).To(HaveLen(1))
	c := env.Spec.Components[0]
	var names, froms []string
	for _, img := range c.Images {
		names = append(names, img.Name)
		froms = append(froms, img.Layers[0].From)
		g.Expect(img.Run.Command).To(Equal([]string{"go", "build", "-o", "out/", "./cmd/..."}))
	}
	g.Expect(names).To(Equal([]string{"batchsh/b-agent", "batchsh/b-agent-scheduler", "batchsh/b-controller-manager",
		"batchsh/b-hypernode-controller-manager", "batchsh/b-scheduler", "batchsh/b-webhook-manager"}))
	g.Expect(froms).To(Equal([]string{"out/agent", "out/agent-scheduler", "out/controller-manager",
		"out/hypernode-controller-manager", "out/scheduler", "out/webhook-manager"}))
	g.Expect(c.Helm.ImageValues).To(Equal([]v1alpha1.ImageValue{
		{Image: "batchsh/b-agent", Path: "basic.image_registry", From: "Registry"},
	}))
}

// TestInitKeepsTheDockerfileBaseForAShippedShellScript: Volcano's
// webhook-manager image ships gen-admission-secret.sh, which the chart's
// pre-install hook runs from that image, and its Dockerfile installs the
// script's tools (openssl, kubectl) on alpine. A distroless base has no
// shell: the hook would fail before the release exists. init keeps the
// Dockerfile's runtime base for such an image and says what it installs;
// images that ship only a binary stay distroless.
func TestInitKeepsTheDockerfileBaseForAShippedShellScript(t *testing.T) {
	g := NewWithT(t)
	env, out := runInit(t, fixture("scheduler"))
	c := env.Spec.Components[0]
	bases := map[string]string{}
	var webhook *v1alpha1.ImageSpec
	for i, img := range c.Images {
		bases[img.Name] = img.Base
		if img.Name == "batchsh/b-webhook-manager" {
			webhook = &c.Images[i]
		}
	}
	g.Expect(webhook).NotTo(BeNil())
	g.Expect(webhook.Base).To(Equal("alpine:3.24.1"))
	g.Expect(webhook.Layers).To(ContainElement(v1alpha1.LayerMapping{
		From: "installer/dockerfile/webhook-manager/gen-admission-secret.sh", To: "/gen-admission-secret.sh"}))
	g.Expect(bases["batchsh/b-scheduler"]).To(Equal(initBase))
	g.Expect(strings.Join(strings.Fields(strings.ReplaceAll(out, "\n#", "")), " ")).To(ContainSubstring(
		"image batchsh/b-webhook-manager: base alpine:3.24.1 as installer/dockerfile/webhook-manager/Dockerfile has it: the image ships a shell script (/gen-admission-secret.sh)"))
}

func TestInitRefusesATreeWithNothingToDraftFrom(t *testing.T) {
	g := NewWithT(t)
	var out, errOut bytes.Buffer
	dir := t.TempDir()
	code := Run(context.Background(), []string{"init", dir}, genericiooptions.IOStreams{Out: &out, ErrOut: &errOut}, Options{})
	g.Expect(code).To(Equal(1))
	g.Expect(errOut.String()).To(ContainSubstring("has no go.mod, Helm chart or config/default kustomization"))
	g.Expect(out.String()).To(BeEmpty())
}

// TestInitOutputIsAccepted: what init writes for each fixture tree is a
// DevEnvironment the API server accepts (OpenAPI and CEL, a dry-run
// create) and devloop's planner builds, as test/crd checks the samples.
func TestInitOutputIsAccepted(t *testing.T) {
	for _, tree := range []string{"operator", "kustomize", "tilt", "umbrella", "scheduler"} {
		t.Run(tree, func(t *testing.T) {
			g := NewWithT(t)
			env, _ := runInit(t, fixture(tree))
			env.Namespace = "default"
			g.Expect(k8s.Create(context.Background(), env, client.DryRunAll)).To(Succeed())
			_, err := plan.Build(&env.Spec)
			g.Expect(err).NotTo(HaveOccurred())
		})
	}
}

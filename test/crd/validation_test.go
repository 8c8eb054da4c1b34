package crd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/plan"
	"github.com/devloop-dev/devloop/internal/testenv"
)

// validEnv is a small environment touching every reference kind: sources,
// images, charts, manifests, imageValues, built test images, dependsOn.
func validEnv() *v1alpha1.DevEnvironment {
	return &v1alpha1.DevEnvironment{
		ObjectMeta: metav1.ObjectMeta{Name: "valid", Namespace: "default"},
		Spec: v1alpha1.DevEnvironmentSpec{
			Registry: &v1alpha1.RegistrySpec{Prefix: "localhost:5000/team-a", Insecure: true},
			Sources: []v1alpha1.Source{
				{Name: "app", Git: &v1alpha1.GitSource{URL: "https://example.com/app.git", Ref: &v1alpha1.GitRef{Branch: "main"}}},
				{Name: "local", OCI: &v1alpha1.OCISource{Repository: "localhost:5000/team-a/src/app", Tag: "dev"}},
			},
			Components: []v1alpha1.Component{
				{Name: "crds", Manifests: &v1alpha1.ManifestsSpec{Source: "app", Paths: []string{"config/crd"}}},
				{Name: "operator", DependsOn: []string{"crds"}, Images: []v1alpha1.ImageSpec{{
					Name: "controller", Source: "local", Base: "gcr.io/distroless/static:nonroot",
					Layers: []v1alpha1.LayerMapping{{From: "out/manager", To: "/manager", Mode: "0755"}},
					Tags:   []string{"{{ .ContentHash }}", "{{ .Revision }}"},
				}}, Helm: &v1alpha1.HelmSpec{
					Chart:       v1alpha1.ChartRef{Source: "app", Path: "deploy/chart"},
					ImageValues: []v1alpha1.ImageValue{{Image: "controller", Path: "validator.version", From: "Revision"}},
				}, Health: &v1alpha1.HealthSpec{Ignore: []v1alpha1.HealthIgnore{{Kind: "ClusterPolicy", Group: "nvidia.com"}}}},
			},
			Tests: []v1alpha1.TestSuite{
				{Name: "unit-tests", Image: v1alpha1.TestImage{Ref: "golang:1.25"}, Source: "app", Command: []string{"make", "test"},
					EnvFrom: []v1alpha1.EnvFromSource{{Kind: "ConfigMap", Name: "unit-settings", Prefix: "UNIT_"}, {Kind: "Secret", Name: "unit-tokens", Optional: true}}},
				{Name: "e2e", Image: v1alpha1.TestImage{Built: "controller"}, Command: []string{"/manager", "--e2e"}, DependsOn: []string{"operator", "unit-tests"}},
			},
		},
	}
}

// livePaths is a liveUpdate of n paths.
func livePaths(n int) *v1alpha1.LiveUpdate {
	lu := &v1alpha1.LiveUpdate{}
	for i := range n {
		lu.Paths = append(lu.Paths, fmt.Sprintf("/app/bin%d", i))
	}
	return lu
}

// TestEveryImageLiveUpdatable: an environment's 16 images may all have
// liveUpdate (issue 33: no cap of two), and 48 paths and command
// arguments together are accepted.
func TestEveryImageLiveUpdatable(t *testing.T) {
	env := validEnv()
	env.Spec.Components[1].Images[0].LiveUpdate = livePaths(2)
	for i := range 15 {
		lu := livePaths(2)
		if i == 0 {
			lu = livePaths(16)
			lu.After, lu.Command = v1alpha1.LiveUpdateCommand, []string{"/reload", "--all"}
		}
		env.Spec.Components = append(env.Spec.Components, v1alpha1.Component{Name: fmt.Sprintf("live%d", i),
			Images: []v1alpha1.ImageSpec{{Name: fmt.Sprintf("live%d", i), LiveUpdate: lu}}})
	}
	// 2 + 16 + 2 + 14*2 = 48.
	NewWithT(t).Expect(create(env)).To(Succeed())
}

func create(env *v1alpha1.DevEnvironment) error {
	return k8s.Create(context.Background(), env, client.DryRunAll)
}

func TestValidEnvironmentAccepted(t *testing.T) {
	NewWithT(t).Expect(create(validEnv())).To(Succeed())
}

func TestSamplesAccepted(t *testing.T) {
	g := NewWithT(t)
	files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "config", "samples", "*.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	local, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "config", "samples", "local", "*.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	files = append(files, local...)
	dev, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "config", "samples", "dev", "*.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	files = append(files, dev...)
	n := 0
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		data, err := os.ReadFile(f)
		g.Expect(err).NotTo(HaveOccurred())
		env := &v1alpha1.DevEnvironment{}
		g.Expect(yaml.UnmarshalStrict(data, env)).To(Succeed(), f)
		env.Namespace = "default"
		g.Expect(create(env)).To(Succeed(), "sample %s", filepath.Base(f))
		// What CEL cannot check: templates, implicit dependencies, cycles.
		_, err = plan.Build(&env.Spec)
		g.Expect(err).NotTo(HaveOccurred(), "sample %s", filepath.Base(f))
		n++
	}
	g.Expect(n).To(BeNumerically(">=", 4))
}

func TestBadSpecsRejected(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*v1alpha1.DevEnvironmentSpec)
		// want are substrings of the API server's message: the field path
		// and what is wrong with it.
		want []string
	}{
		{"duplicate component names", func(s *v1alpha1.DevEnvironmentSpec) {
			s.Components = append(s.Components, s.Components[0])
		}, []string{`spec.components[2]`, `Duplicate value`}},
		{"component and test share a name", func(s *v1alpha1.DevEnvironmentSpec) {
			s.Tests[0].Name = "crds"
		}, []string{`spec.tests`, `names must be unique across components and tests`}},
		{"dangling component dependsOn", func(s *v1alpha1.DevEnvironmentSpec) {
			s.Components[1].DependsOn = []string{"crds", "database"}
		}, []string{`spec.components`, `components[].dependsOn must name components of this environment`}},
		{"dangling test dependsOn", func(s *v1alpha1.DevEnvironmentSpec) {
			s.Tests[1].DependsOn = []string{"kwok"}
		}, []string{`spec.tests`, `tests[].dependsOn must name components or test suites`}},
		{"component depends on itself", func(s *v1alpha1.DevEnvironmentSpec) {
			s.Components[1].DependsOn = []string{"operator"}
		}, []string{`spec.components[1].dependsOn`, `component operator depends on itself`}},
		{"unknown image source", func(s *v1alpha1.DevEnvironmentSpec) {
			s.Components[1].Images[0].Source = "laptop"
		}, []string{`spec.components`, `components[].images[].source must name one of spec.sources`}},
		{"unknown chart source", func(s *v1alpha1.DevEnvironmentSpec) {
			s.Components[1].Helm.Chart.Source = "charts"
		}, []string{`spec.components`, `components[].helm.chart.source and components[].manifests.source must name one of spec.sources`}},
		{"unknown test source", func(s *v1alpha1.DevEnvironmentSpec) {
			s.Tests[0].Source = "nowhere"
		}, []string{`spec.tests`, `tests[].source must name one of spec.sources`}},
		{"test runs an image nobody builds", func(s *v1alpha1.DevEnvironmentSpec) {
			s.Tests[1].Image.Built = "validator"
		}, []string{`spec.tests`, `tests[].image.built must name an image built by a component`}},
		{"imageValues of an unknown image", func(s *v1alpha1.DevEnvironmentSpec) {
			s.Components[1].Helm.ImageValues[0].Image = "validator"
		}, []string{`spec.components`, `components[].helm.imageValues[].image must name an image`}},
		{"unknown tag template variable", func(s *v1alpha1.DevEnvironmentSpec) {
			s.Components[1].Images[0].Tags = []string{"{{ .Commit }}"}
		}, []string{`spec.components[1].images[0].tags[0]`, `must be a tag template`, `{{ .ContentHash }}`}},
		{"unclosed tag template", func(s *v1alpha1.DevEnvironmentSpec) {
			s.Components[1].Images[0].Tags = []string{"v1-{{ .Revision"}
		}, []string{`spec.components[1].images[0].tags[0]`}},
		{"liveUpdate path not absolute", func(s *v1alpha1.DevEnvironmentSpec) {
			s.Components[1].Images[0].LiveUpdate = &v1alpha1.LiveUpdate{Paths: []string{"manager"}}
		}, []string{`spec.components[1].images[0].liveUpdate.paths[0]`, `liveUpdate.paths must be absolute paths`}},
		{"liveUpdate path in the supervisor's directory", func(s *v1alpha1.DevEnvironmentSpec) {
			s.Components[1].Images[0].LiveUpdate = &v1alpha1.LiveUpdate{Paths: []string{"/.devloop/supervisor"}}
		}, []string{`spec.components[1].images[0].liveUpdate.paths[0]`, `outside /.devloop`}},
		{"liveUpdate command without after: Command", func(s *v1alpha1.DevEnvironmentSpec) {
			s.Components[1].Images[0].LiveUpdate = &v1alpha1.LiveUpdate{Paths: []string{"/manager"}, Command: []string{"/reload"}}
		}, []string{`spec.components[1].images[0].liveUpdate.command`, `liveUpdate.command is only run with liveUpdate.after: Command`}},
		{"liveUpdate after: Command without command", func(s *v1alpha1.DevEnvironmentSpec) {
			s.Components[1].Images[0].LiveUpdate = &v1alpha1.LiveUpdate{Paths: []string{"/manager"}, After: v1alpha1.LiveUpdateCommand}
		}, []string{`spec.components[1].images[0].liveUpdate.command`, `liveUpdate.after: Command needs liveUpdate.command`}},
		{"too many live paths and command arguments", func(s *v1alpha1.DevEnvironmentSpec) {
			for i := 0; i < 3; i++ {
				s.Components = append(s.Components, v1alpha1.Component{Name: fmt.Sprintf("live%d", i), Images: []v1alpha1.ImageSpec{{
					Name: fmt.Sprintf("live%d", i), LiveUpdate: livePaths(16)}}})
			}
			s.Components[4].Images[0].LiveUpdate.After = v1alpha1.LiveUpdateCommand
			s.Components[4].Images[0].LiveUpdate.Command = []string{"/reload"}
		}, []string{`spec.components`, `at most 48 liveUpdate paths and command arguments`}},
		{"too many components", func(s *v1alpha1.DevEnvironmentSpec) {
			for i := 0; i < 32; i++ {
				s.Components = append(s.Components, v1alpha1.Component{Name: fmt.Sprintf("c%d", i), Manifests: &v1alpha1.ManifestsSpec{Source: "app"}})
			}
		}, []string{`spec.components`, `Too many`, `at most 32`}},
		{"too many images in the environment", func(s *v1alpha1.DevEnvironmentSpec) {
			for i := 0; i < 3; i++ {
				c := v1alpha1.Component{Name: fmt.Sprintf("imgs%d", i)}
				for j := 0; j < 6; j++ {
					c.Images = append(c.Images, v1alpha1.ImageSpec{Name: fmt.Sprintf("img-%d-%d", i, j)})
				}
				s.Components = append(s.Components, c)
			}
		}, []string{`spec.components`, `at most 16 images in one environment`}},
		{"invalid component name", func(s *v1alpha1.DevEnvironmentSpec) {
			s.Components[0].Name = "CRDs_v1"
			s.Components[1].DependsOn = nil
		}, []string{`spec.components[0].name`, `must be lower-case letters, digits and '-'`}},
		{"component name too long", func(s *v1alpha1.DevEnvironmentSpec) {
			s.Tests[0].Name = strings.Repeat("a", 64)
		}, []string{`spec.tests[0].name`, `Too long`}},
		{"source with both git and oci", func(s *v1alpha1.DevEnvironmentSpec) {
			s.Sources[0].OCI = &v1alpha1.OCISource{Repository: "localhost:5000/x/y"}
		}, []string{`spec.sources[0]`, `exactly one of git, oci, sourceRef or output must be set`}},
		{"registry prefix with a scheme", func(s *v1alpha1.DevEnvironmentSpec) {
			s.Registry.Prefix = "http://localhost:5000/team-a"
		}, []string{`spec.registry.prefix`, `no scheme`, `plain HTTP is set with insecure`}},
		{"images without a registry", func(s *v1alpha1.DevEnvironmentSpec) {
			s.Registry = nil
		}, []string{`spec.registry`, `registry is required when a component builds images`}},
		{"layer escaping the source", func(s *v1alpha1.DevEnvironmentSpec) {
			s.Components[1].Images[0].Layers[0].From = "../../etc/passwd"
		}, []string{`spec.components[1].images[0].layers[0].from`, `without '..'`}},
		{"helm and manifests in one component", func(s *v1alpha1.DevEnvironmentSpec) {
			s.Components[1].Manifests = &v1alpha1.ManifestsSpec{Source: "app"}
		}, []string{`spec.components[1]`, `set helm or manifests, not both`}},
		{"health on a component that deploys nothing", func(s *v1alpha1.DevEnvironmentSpec) {
			s.Components[1].Helm = nil
			s.Components[1].Health = &v1alpha1.HealthSpec{Ignore: []v1alpha1.HealthIgnore{{Kind: "ClusterPolicy"}}}
		}, []string{`spec.components[1].health`, `health applies to what helm or manifests deploy`}},
		{"more than 8 health.ignore entries", func(s *v1alpha1.DevEnvironmentSpec) {
			four := []v1alpha1.HealthIgnore{{Kind: "A"}, {Kind: "B"}, {Kind: "C"}, {Kind: "D"}}
			s.Components[0].Health = &v1alpha1.HealthSpec{Ignore: four}
			s.Components[1].Health = &v1alpha1.HealthSpec{Ignore: four}
			s.Components = append(s.Components, v1alpha1.Component{Name: "more", Manifests: &v1alpha1.ManifestsSpec{Source: "app"},
				Health: &v1alpha1.HealthSpec{Ignore: four[:1]}})
		}, []string{`spec.components`, `at most 8 health.ignore entries in one environment`}},
		{"health ignore without a kind", func(s *v1alpha1.DevEnvironmentSpec) {
			s.Components[1].Health = &v1alpha1.HealthSpec{Ignore: []v1alpha1.HealthIgnore{{Name: "cluster-policy"}}}
		}, []string{`spec.components[1].health.ignore[0].kind`}},
		{"test image both ref and built", func(s *v1alpha1.DevEnvironmentSpec) {
			s.Tests[1].Image.Ref = "busybox"
		}, []string{`spec.tests[1].image`, `exactly one of ref or built`}},
		{"chart from nowhere", func(s *v1alpha1.DevEnvironmentSpec) {
			s.Components[1].Helm.Chart = v1alpha1.ChartRef{Version: "1.0.0"}
		}, []string{`spec.components[1].helm.chart`, `exactly one of source, oci or repo`}},
		{"history limit out of bounds", func(s *v1alpha1.DevEnvironmentSpec) {
			n := int32(50)
			s.HistoryLimit = &n
		}, []string{`spec.historyLimit`, `less than or equal to 10`}},
		{"envFrom naming no valid object", func(s *v1alpha1.DevEnvironmentSpec) {
			s.Tests[0].EnvFrom[0].Name = "Unit_Settings"
		}, []string{`spec.tests[0].envFrom[0].name`, `envFrom[].name must be a ConfigMap or Secret name`}},
		{"envFrom of another kind", func(s *v1alpha1.DevEnvironmentSpec) {
			s.Tests[0].EnvFrom[0].Kind = "Pod"
		}, []string{`spec.tests[0].envFrom[0].kind`, `Unsupported value`, `"ConfigMap"`}},
		{"envFrom prefix not starting a variable name", func(s *v1alpha1.DevEnvironmentSpec) {
			s.Tests[0].EnvFrom[0].Prefix = "1-"
		}, []string{`spec.tests[0].envFrom[0].prefix`, `envFrom[].prefix must start an environment variable name`}},
		{"run envFrom without a name", func(s *v1alpha1.DevEnvironmentSpec) {
			s.Components[1].Images[0].Run = &v1alpha1.BuildRun{Image: "golang", Command: []string{"make"}, EnvFrom: []v1alpha1.EnvFromSource{{Kind: "Secret"}}}
		}, []string{`spec.components[1].images[0].run.envFrom[0].name`}},
		{"too many env entries in the environment", func(s *v1alpha1.DevEnvironmentSpec) {
			for i := 0; i < 7; i++ {
				suite := v1alpha1.TestSuite{Name: fmt.Sprintf("env%d", i), Image: v1alpha1.TestImage{Ref: "busybox"}, Command: []string{"true"}}
				for j := 0; j < 7; j++ {
					suite.Env = append(suite.Env, v1alpha1.EnvVar{Name: fmt.Sprintf("V%d", j), Value: "x"})
				}
				s.Tests = append(s.Tests, suite)
			}
		}, []string{`spec`, `at most 48 env entries in one environment`, `envFrom`}},
		{"too many command arguments in the environment", func(s *v1alpha1.DevEnvironmentSpec) {
			for i := 0; i < 13; i++ {
				s.Tests = append(s.Tests, v1alpha1.TestSuite{Name: fmt.Sprintf("cmd%d", i), Image: v1alpha1.TestImage{Ref: "busybox"},
					Command: []string{"a", "b", "c", "d", "e", "f", "g", "h"}})
			}
		}, []string{`spec`, `at most 96 command arguments in one environment`}},
		{"too many envFrom entries in the environment", func(s *v1alpha1.DevEnvironmentSpec) {
			for i := 0; i < 4; i++ {
				suite := v1alpha1.TestSuite{Name: fmt.Sprintf("from%d", i), Image: v1alpha1.TestImage{Ref: "busybox"}, Command: []string{"true"}}
				for j := 0; j < 4; j++ {
					suite.EnvFrom = append(suite.EnvFrom, v1alpha1.EnvFromSource{Kind: "ConfigMap", Name: fmt.Sprintf("cm%d", j)})
				}
				s.Tests = append(s.Tests, suite)
			}
		}, []string{`spec`, `at most 16 envFrom entries in one environment`}},
		{"image name used twice", func(s *v1alpha1.DevEnvironmentSpec) {
			s.Components[0].Images = []v1alpha1.ImageSpec{{Name: "controller"}}
		}, []string{`spec.components`, `image names must be unique across components`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			env := validEnv()
			tc.mutate(&env.Spec)
			err := create(env)
			g.Expect(err).To(HaveOccurred(), "the API server accepted it")
			for _, w := range tc.want {
				g.Expect(err.Error()).To(ContainSubstring(w))
			}
			// Every rule says what is expected, never a raw regex.
			g.Expect(err.Error()).NotTo(ContainSubstring("should match"))
		})
	}
}

package plan

import (
	"errors"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/chartutil"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/builder"
)

// planEnv starts the specs Build is tried on: images pushed to
// localhost:5000/path.
func planEnv(path string) *builder.EnvSpec {
	return builder.Env("", "").In("localhost:5000").Under(path).HTTPS().Registry()
}

func validSpec() *v1alpha1.DevEnvironmentSpec {
	spec := planEnv("team-a").
		Source(v1alpha1.Source{Name: "app", OCI: &v1alpha1.OCISource{Repository: "localhost:5000/src/app"}}).
		Components(
			builder.Component("crds", builder.Manifests()),
			builder.Component("operator", builder.DependsOn("crds"),
				builder.Images(builder.Image("controller", builder.Base("gcr.io/distroless/static:nonroot"),
					builder.Tags("{{ .ContentHash }}", "{{ .Revision }}"))),
				builder.Chart("chart", builder.ImageValues(v1alpha1.ImageValue{Image: "controller", Path: "validator.version", From: "Revision"}))),
		).
		Suites(
			builder.BuiltSuite("unit", "controller", "true").Source("").After("operator"),
			builder.ImageSuite("e2e", "golang:1.25", "true").After("unit"),
		).Spec()
	return &spec
}

func TestBuildOrdersComponentsAndTests(t *testing.T) {
	g := NewWithT(t)
	p, err := Build(validSpec())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.Order).To(Equal([]string{"crds", "operator", "unit", "e2e"}))
	g.Expect(p.ComponentOrder()).To(Equal([]string{"crds", "operator"}))
}

func TestBuildRejects(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*v1alpha1.DevEnvironmentSpec)
		field  string
	}{
		{"cycle through components", func(s *v1alpha1.DevEnvironmentSpec) { s.Components[0].DependsOn = []string{"operator"} }, "cycle"},
		{"cycle through tests", func(s *v1alpha1.DevEnvironmentSpec) { s.Tests[0].DependsOn = []string{"e2e"} }, "cycle"},
		{"dangling dependsOn", func(s *v1alpha1.DevEnvironmentSpec) { s.Components[1].DependsOn = []string{"nope"} }, "spec.components[1].dependsOn[0]"},
		{"unknown source", func(s *v1alpha1.DevEnvironmentSpec) { s.Components[1].Images[0].Source = "nope" }, "spec.components[1].images[0].source"},
		{"unknown built image", func(s *v1alpha1.DevEnvironmentSpec) { s.Tests[0].Image.Built = "nope" }, "spec.tests[0].image.built"},
		{"unknown imageValues image", func(s *v1alpha1.DevEnvironmentSpec) { s.Components[1].Helm.ImageValues[0].Image = "nope" }, "spec.components[1].helm.imageValues[0].image"},
		{"test named like a component", func(s *v1alpha1.DevEnvironmentSpec) { s.Tests[0].Name = "crds" }, "spec.tests[0].name"},
		{"unknown template variable", func(s *v1alpha1.DevEnvironmentSpec) { s.Components[1].Images[0].Tags[1] = "{{ .Commit }}" }, "spec.components[1].images[0].tags[1]"},
		{"template too long", func(s *v1alpha1.DevEnvironmentSpec) {
			s.Components[1].Images[0].Tags[1] = "{{ .Revision }}-{{ .ContentHash }}"
		}, "spec.components[1].images[0].tags[1]"},
		{"bad base reference", func(s *v1alpha1.DevEnvironmentSpec) { s.Components[1].Images[0].Base = "UPPER/case:x" }, "spec.components[1].images[0].base"},
		{"bad registry prefix", func(s *v1alpha1.DevEnvironmentSpec) { s.Registry.Prefix = "http://x" }, "spec.registry.prefix"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			spec := validSpec()
			tc.mutate(spec)
			_, err := Build(spec)
			g.Expect(err).To(HaveOccurred())
			if tc.field == "cycle" {
				var cycle *CycleError
				g.Expect(errors.As(err, &cycle)).To(BeTrue(), "%v", err)
				g.Expect(cycle.Path[0]).To(Equal(cycle.Path[len(cycle.Path)-1]))
				return
			}
			var invalid *InvalidError
			g.Expect(errors.As(err, &invalid)).To(BeTrue(), "%v", err)
			g.Expect(err.Error()).To(ContainSubstring(tc.field))
		})
	}
}

// FuzzBuild builds specs from arbitrary input: Build never panics, and when
// it accepts a spec, Order holds every component and test after its
// dependencies.
func FuzzBuild(f *testing.F) {
	f.Add([]byte{2, 1, 0, 0, 1}, "{{ .ContentHash }}", "gcr.io/distroless/static")
	f.Add([]byte{4, 3, 1, 2, 2, 3, 3, 1}, "v1-{{ .ShortRevision }}", "")
	f.Add([]byte{1, 1, 0, 0}, "{{ .Nope }}", "::")
	f.Fuzz(func(t *testing.T, data []byte, tag, base string) {
		if len(data) < 2 {
			return
		}
		names := []string{"a", "b", "c", "d", "e", "f"}
		built := planEnv("x").Source(v1alpha1.Source{Name: "src"}).Spec()
		spec := &built
		nc, nt := int(data[0])%4+1, int(data[1])%3
		for i := 0; i < nc; i++ {
			spec.Components = append(spec.Components, v1alpha1.Component{
				Name:   names[i],
				Images: []v1alpha1.ImageSpec{{Name: "img-" + names[i], Source: "src", Base: base, Tags: []string{tag}}},
			})
		}
		for i := 0; i < nt; i++ {
			spec.Tests = append(spec.Tests, v1alpha1.TestSuite{Name: "t" + names[i], Image: v1alpha1.TestImage{Built: "img-a"}})
		}
		all := append(append([]string{}, names[:nc]...), "ta", "tb", "tc", "ghost")
		for i := 2; i+1 < len(data); i += 2 {
			from, to := int(data[i])%(nc+nt), all[int(data[i+1])%len(all)]
			if from < nc {
				spec.Components[from].DependsOn = append(spec.Components[from].DependsOn, to)
			} else {
				spec.Tests[from-nc].DependsOn = append(spec.Tests[from-nc].DependsOn, to)
			}
		}
		p, err := Build(spec)
		if err != nil {
			if !strings.Contains(err.Error(), "spec.") {
				t.Fatalf("error does not name a field: %v", err)
			}
			return
		}
		pos := map[string]int{}
		for i, n := range p.Order {
			pos[n] = i
		}
		for _, n := range p.Order {
			for _, d := range p.Graph.DependsOn(n) {
				if pos[d] >= pos[n] {
					t.Fatalf("%s before its dependency %s in %v", n, d, p.Order)
				}
			}
		}
	})
}

// TestReleaseNamesAsHelmChecksThem holds checkReleaseName to Helm's own
// rule.
func TestReleaseNamesAsHelmChecksThem(t *testing.T) {
	names := []string{"web", "a", "a.b", "a-b.c-d", "-a", "a-", "A", "a_b", "a..b", ".a", "a.",
		strings.Repeat("a", 53), strings.Repeat("a", 54), "ünï", "a/b", "1", "0-0"}
	for _, n := range names {
		ours, helms := checkReleaseName(n) == nil, chartutil.ValidateReleaseName(n) == nil
		if ours != helms {
			t.Errorf("release name %q: devloop accepts=%v, Helm accepts=%v", n, ours, helms)
		}
	}
}

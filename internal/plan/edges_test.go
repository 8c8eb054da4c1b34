package plan

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/builder"
)

// bundleSpec is an operator project's loop: the operator image, then a
// bundle whose build reads the operator's digest, then the CRDs its run
// step generates, deployed by a later component. Nothing lists the
// dependencies the templates and the output source make.
func bundleSpec() *v1alpha1.DevEnvironmentSpec {
	spec := builder.Env("", "").In("localhost:5000").Under("team-a").HTTPS().Registry().
		Source(
			v1alpha1.Source{Name: "app", OCI: &v1alpha1.OCISource{Repository: "localhost:5000/src/app"}},
			v1alpha1.Source{Name: "crds", Output: &v1alpha1.BuildOutputReference{Image: "operator", Name: "crds"}},
		).
		Components(
			builder.Component("bundle", builder.Images(builder.Image("bundle", builder.Run(&v1alpha1.BuildRun{
				Image:   "golang:1.25",
				Command: []string{"make", "bundle", "VERSION={{ .ShortRevision }}"},
				Env:     []v1alpha1.EnvVar{{Name: "GOFLAGS", Value: "-mod=mod"}, {Name: "IMG", Value: `{{ (image "operator").Reference }}`}},
			})))),
			builder.Component("crds", builder.ManifestsOf("crds")),
			builder.Component("operator", builder.Images(builder.Image("operator", builder.Run(&v1alpha1.BuildRun{
				Image:   "golang:1.25",
				Command: []string{"make", "manifests", "build"},
				Outputs: []v1alpha1.RunOutput{{Name: "crds", Path: "config/crd/bases"}},
			})))),
		).Spec()
	return &spec
}

func TestImplicitEdgesOrderAndGate(t *testing.T) {
	g := NewWithT(t)
	p, err := Build(bundleSpec())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.ComponentOrder()).To(Equal([]string{"operator", "bundle", "crds"}))
	g.Expect(p.Graph.DependsOn("bundle")).To(Equal([]string{"operator"}))
	g.Expect(p.Graph.DependsOn("crds")).To(Equal([]string{"operator"}))
	g.Expect(p.Implicit).To(Equal(map[string][]string{"bundle": {"operator"}, "crds": {"operator"}}))
	g.Expect(p.Graph.WaitingFor("bundle", func(string) bool { return false })).To(Equal([]string{"operator"}),
		"an implicit edge blocks like dependsOn, so status.waitingFor names it")

	// An edge dependsOn also lists is there once.
	spec := bundleSpec()
	spec.Components[0].DependsOn = []string{"operator"}
	p, err = Build(spec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.Graph.DependsOn("bundle")).To(Equal([]string{"operator"}))
	g.Expect(p.Implicit).NotTo(HaveKey("bundle"))
}

func TestImplicitEdgesReject(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*v1alpha1.DevEnvironmentSpec)
		want   string
	}{
		{"unknown image", func(s *v1alpha1.DevEnvironmentSpec) {
			s.Components[0].Images[0].Run.Env[1].Value = `{{ (image "nope").Digest }}`
		}, `spec.components[0].images[0].run.env[1].value: Invalid value: "{{ (image \"nope\").Digest }}": image "nope" is not built by any component`},
		{"image of the same component", func(s *v1alpha1.DevEnvironmentSpec) {
			s.Components[0].Images[0].Run.Command[2] = `IMG={{ (image "bundle").Reference }}`
		}, `spec.components[0].images[0].run.command[2]: Invalid value: "IMG={{ (image \"bundle\").Reference }}": image "bundle" is not built by a component before this one: component bundle builds it itself`},
		{"unknown variable", func(s *v1alpha1.DevEnvironmentSpec) {
			s.Components[0].Images[0].Run.Command[2] = "VERSION={{ .ContentHash }}"
		}, `spec.components[0].images[0].run.command[2]: Invalid value: "VERSION={{ .ContentHash }}": template: run:1:11: executing "run" at <.ContentHash>: can't evaluate field ContentHash`},
		{"unknown field of an image", func(s *v1alpha1.DevEnvironmentSpec) {
			s.Components[0].Images[0].Run.Env[1].Value = `{{ (image "operator").Version }}`
		}, `spec.components[0].images[0].run.env[1].value`},
		{"unknown function", func(s *v1alpha1.DevEnvironmentSpec) {
			s.Components[0].Images[0].Run.Env[0].Value = `{{ env "HOME" }}`
		}, `spec.components[0].images[0].run.env[0].value: Invalid value: "{{ env \"HOME\" }}": template: run:1: function "env" not defined`},
		{"unparsable", func(s *v1alpha1.DevEnvironmentSpec) {
			s.Components[0].Images[0].Run.Command[0] = "{{ .Revision"
		}, `spec.components[0].images[0].run.command[0]`},
		{"image name not a literal", func(s *v1alpha1.DevEnvironmentSpec) {
			s.Components[0].Images[0].Run.Env[1].Value = `{{ (image .Component).Digest }}`
		}, `image takes one quoted image name`},
		{"image name piped", func(s *v1alpha1.DevEnvironmentSpec) {
			s.Components[0].Images[0].Run.Env[1].Value = `{{ ("operator" | image).Digest }}`
		}, `spec.components[0].images[0].run.env[1].value`},
		{"image in a branch never taken", func(s *v1alpha1.DevEnvironmentSpec) {
			s.Components[0].Images[0].Run.Env[1].Value = `{{ if false }}{{ (image "nope").Digest }}{{ end }}`
		}, `image "nope" is not built by any component`},
		{"output of an unknown image", func(s *v1alpha1.DevEnvironmentSpec) { s.Sources[1].Output.Image = "nope" },
			`spec.sources[1].output: Invalid value: "nope crds": image "nope" is not built by any component`},
		{"output not declared", func(s *v1alpha1.DevEnvironmentSpec) { s.Sources[1].Output.Name = "rbac" },
			`spec.sources[1].output: Invalid value: "operator rbac": image "operator"'s run step has no output "rbac" in run.outputs (it declares crds)`},
		{"output of an image without a run step", func(s *v1alpha1.DevEnvironmentSpec) { s.Components[2].Images[0].Run = nil },
			`spec.sources[1].output: Invalid value: "operator crds": image "operator" has no run step to produce output "crds"`},
		{"output used by the component building it", func(s *v1alpha1.DevEnvironmentSpec) {
			s.Components[2].Manifests = &v1alpha1.ManifestsSpec{Source: "crds"}
		}, `spec.components[2].manifests.source: Invalid value: "crds": source "crds" is an output of this component's own build (image operator)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			spec := bundleSpec()
			tc.mutate(spec)
			_, err := Build(spec)
			var invalid *InvalidError
			g.Expect(errors.As(err, &invalid)).To(BeTrue(), "%v", err)
			g.Expect(err.Error()).To(ContainSubstring(tc.want))
		})
	}
}

// A template that reads an image of a component depending on this one
// closes a cycle: the error names its path and the template.
func TestCycleThroughATemplate(t *testing.T) {
	g := NewWithT(t)
	spec := bundleSpec()
	spec.Components[2].DependsOn = []string{"bundle"}
	_, err := Build(spec)
	var cycle *CycleError
	g.Expect(errors.As(err, &cycle)).To(BeTrue(), "%v", err)
	g.Expect(cycle.Path).To(Equal([]string{"bundle", "operator", "bundle"}))
	g.Expect(err.Error()).To(Equal("spec.components[0].images[0].run.env[1].value: dependency cycle: bundle -> operator -> bundle"))

	// Through an output source: the operator's image is built from what
	// the bundle's run step produces.
	spec = bundleSpec()
	spec.Sources = append(spec.Sources, v1alpha1.Source{Name: "generated", Output: &v1alpha1.BuildOutputReference{Image: "bundle", Name: "manifests"}})
	spec.Components[0].Images[0].Run.Outputs = []v1alpha1.RunOutput{{Name: "manifests", Path: "bundle"}}
	spec.Components[2].Images[0].Source = "generated"
	_, err = Build(spec)
	g.Expect(errors.As(err, &cycle)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(Equal("spec.components[0].images[0].run.env[1].value: dependency cycle: bundle -> operator -> bundle"))
}

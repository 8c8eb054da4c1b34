package plan

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

func TestRenderRunParameterizedByImage(t *testing.T) {
	g := NewWithT(t)
	run := &v1alpha1.BuildRun{
		Image:   "golang:1.25",
		Command: []string{"make", "{{ .ImageBase }}", "TAG={{ .ShortRevision }}", "{{ .Component }}/{{ .Image }}@{{ .Source }}"},
		Env: []v1alpha1.EnvVar{
			{Name: "GIT_COMMIT", Value: "{{ .Revision }}"},
			{Name: "OPERATOR", Value: `{{ (image "operator").Reference }}`},
			{Name: "PLAIN", Value: "{not a template}"},
		},
	}
	tags := NewTagTemplates(nil, "volcano", "volcanosh/vc-scheduler", "app", "0123456789abcdef0123")
	operator := BuiltImage{Reference: "localhost:5001/t/operator@sha256:aa", Repository: "localhost:5001/t/operator", Digest: "sha256:aa", Tag: "cc"}
	var asked []string
	out, err := RenderRun(run, RunValuesOf(tags.Values), func(name string) (BuiltImage, error) {
		asked = append(asked, name)
		return operator, nil
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.Command).To(Equal([]string{"make", "vc-scheduler", "TAG=0123456789ab", "volcano/volcanosh/vc-scheduler@app"}))
	g.Expect(out.Env).To(Equal([]v1alpha1.EnvVar{
		{Name: "GIT_COMMIT", Value: "0123456789abcdef0123"},
		{Name: "OPERATOR", Value: "localhost:5001/t/operator@sha256:aa"},
		{Name: "PLAIN", Value: "{not a template}"},
	}))
	g.Expect(asked).To(Equal([]string{"operator"}))
	g.Expect(run.Command[1]).To(Equal("{{ .ImageBase }}"), "the spec is not changed")
	g.Expect(run.Env[1].Value).To(Equal(`{{ (image "operator").Reference }}`))
}

func TestRenderRunErrorsNameTheField(t *testing.T) {
	g := NewWithT(t)
	run := &v1alpha1.BuildRun{Command: []string{"true"}, Env: []v1alpha1.EnvVar{{Name: "A", Value: `{{ (image "operator").Digest }}`}}}
	_, err := RenderRun(run, RunValues{}, func(name string) (BuiltImage, error) {
		return BuiltImage{}, errors.New("image operator has no digest yet")
	})
	g.Expect(err).To(MatchError(ContainSubstring("run.env[0].value: ")))
	g.Expect(err).To(MatchError(ContainSubstring("image operator has no digest yet")))
}

func TestRunImages(t *testing.T) {
	g := NewWithT(t)
	names, err := RunImages(&v1alpha1.BuildRun{
		Command: []string{"echo", `{{ (image "b").Tag }}`, `{{ with image "a" }}{{ .Digest }}{{ end }}`},
		Env:     []v1alpha1.EnvVar{{Name: "X", Value: `{{ (image "b").Digest }}{{ range $i := "" }}{{ (image "c").Digest }}{{ end }}`}},
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names).To(Equal([]string{"b", "a", "c"}))
}

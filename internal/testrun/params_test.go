package testrun

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

var paramSuites = []v1alpha1.TestSuite{
	{Name: "unit-tests", Labels: []string{"fast"}},
	{Name: "e2e", Labels: []string{"e2e"}, Params: []string{"E2E_FOCUS", "E2E_SKIP"}},
}

func TestParseParams(t *testing.T) {
	g := NewWithT(t)
	tr, err := Parse("e2e(E2E_SKIP=Flaky;E2E_FOCUS=Job%7CPod%2Cfast+x)@pr-1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tr.Token).To(Equal("pr-1"))
	reqs, err := tr.Requests(paramSuites)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reqs).To(Equal([]Request{{Suite: "e2e", Params: []v1alpha1.EnvVar{
		{Name: "E2E_FOCUS", Value: "Job|Pod,fast x"}, {Name: "E2E_SKIP", Value: "Flaky"}}}}))

	// What the plugin writes reads back the same.
	params := []v1alpha1.EnvVar{{Name: "E2E_FOCUS", Value: "a;b)c@d,e%f+g h"}}
	tr, err = Parse(FormatSelector("e2e", params) + ",unit-tests")
	g.Expect(err).NotTo(HaveOccurred())
	reqs, err = tr.Requests(paramSuites)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reqs).To(Equal([]Request{{Suite: "unit-tests"}, {Suite: "e2e", Params: params}}))

	for value, want := range map[string]string{
		"e2e(E2E_FOCUS)":               "is not NAME=value",
		"e2e(1X=a)":                    "is not NAME=value",
		"e2e(E2E_FOCUS=a;E2E_FOCUS=b)": "sets E2E_FOCUS twice",
		"e2e(E2E_FOCUS=a)x":            "parentheses at the end",
		"e2e)":                         "without '('",
		"e2e(E2E_FOCUS=%zz)":           "not query-escaped",
		"cancel:e2e(E2E_FOCUS=a)":      "a cancel takes no parameters",
	} {
		_, err := Parse(value)
		g.Expect(err).To(MatchError(ContainSubstring(want)), value)
	}
}

func TestRequestsRefuseUnknownParams(t *testing.T) {
	g := NewWithT(t)
	tr, err := Parse("e2e(E2E_FOCUS=Job;GOFLAGS=-x)")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = tr.Requests(paramSuites)
	var pe *ParamError
	g.Expect(errors.As(err, &pe)).To(BeTrue())
	g.Expect(err.Error()).To(ContainSubstring("suite e2e does not accept GOFLAGS"))
	g.Expect(err.Error()).To(ContainSubstring("Accepted params: E2E_FOCUS, E2E_SKIP"))

	tr, _ = Parse("unit-tests(E2E_FOCUS=Job)")
	_, err = tr.Requests(paramSuites)
	g.Expect(err).To(MatchError(ContainSubstring("lists no tests[].params")))

	tr, _ = Parse("e2e(E2E_FOCUS=a),label:e2e")
	_, err = tr.Requests(paramSuites)
	g.Expect(err).To(MatchError(ContainSubstring("twice with different params")))
}

func TestParamsWinOverSuiteEnv(t *testing.T) {
	g := NewWithT(t)
	job := &batchv1.Job{}
	job.Spec.Template.Spec.Containers = []corev1.Container{{Name: ContainerTest, Env: []corev1.EnvVar{{Name: "E2E_FOCUS", Value: "default"}}}}
	withParams(job, []v1alpha1.EnvVar{{Name: "E2E_FOCUS", Value: "Job"}})
	env := job.Spec.Template.Spec.Containers[0].Env
	g.Expect(env[len(env)-1]).To(Equal(corev1.EnvVar{Name: "E2E_FOCUS", Value: "Job"}))
}

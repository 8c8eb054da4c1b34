package plan

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// values is helm.values of n bytes of JSON.
func values(n int) *apiextensionsv1.JSON {
	pad := n - len(`{"x":""}`)
	return &apiextensionsv1.JSON{Raw: []byte(fmt.Sprintf(`{"x":%q}`, strings.Repeat("v", pad)))}
}

func TestHelmValuesAreBoundedPerEnvironment(t *testing.T) {
	g := NewWithT(t)
	spec := validSpec()
	spec.Components = append(spec.Components, v1alpha1.Component{Name: "extra", Helm: &v1alpha1.HelmSpec{Chart: v1alpha1.ChartRef{Source: "app", Path: "chart"}}})
	spec.Components[1].Helm.Values = values(v1alpha1.MaxHelmValues / 2)
	spec.Components[2].Helm.Values = values(v1alpha1.MaxHelmValues - v1alpha1.MaxHelmValues/2)
	_, err := Build(spec)
	g.Expect(err).NotTo(HaveOccurred(), "values at the total")

	spec.Components[2].Helm.Values = values(v1alpha1.MaxHelmValues - v1alpha1.MaxHelmValues/2 + 1)
	_, err = Build(spec)
	var invalid *InvalidError
	g.Expect(errors.As(err, &invalid)).To(BeTrue(), "a spec the environment stalls on")
	g.Expect(err.Error()).To(And(ContainSubstring("spec.components[2].helm.values"), ContainSubstring("more than the 32768"), ContainSubstring("valuesFrom")))
}

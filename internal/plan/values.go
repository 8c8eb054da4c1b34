package plan

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// checkValuesSize holds the components' helm.values, which no schema can
// bound (free-form YAML), to v1alpha1.MaxHelmValues bytes of JSON together:
// the object, its status included, must fit in etcd, and the size budget
// (test/crd) counts values at that total. It names the component whose
// values go over.
func checkValuesSize(spec *v1alpha1.DevEnvironmentSpec, root *field.Path) field.ErrorList {
	total := 0
	for i, c := range spec.Components {
		values := c.HelmValues()
		if values == nil {
			continue
		}
		n := len(values.Raw)
		total += n
		if total > v1alpha1.MaxHelmValues {
			return field.ErrorList{field.Invalid(root.Child("components").Index(i).Child("helm", "values"), fmt.Sprintf("%d bytes", n),
				fmt.Sprintf("the components' helm.values come to %d bytes of JSON up to here, more than the %d an environment may hold: put large values in a ConfigMap and name it in helm.valuesFrom", total, v1alpha1.MaxHelmValues))}
		}
	}
	return nil
}

package deploy

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/devloop-dev/devloop/internal/fault"
)

// TestInvalidIsWordedWithoutTheValue: the API server quotes the whole
// rejected value (a pod template printed as a Go struct); status gets the
// field and what is wrong with it.
func TestInvalidIsWordedWithoutTheValue(t *testing.T) {
	g := NewWithT(t)
	dump := "core.PodTemplateSpec{ObjectMeta:v1.ObjectMeta{Name:\"\", " + strings.Repeat("Labels:map[string]string{\"a\":\"b\"}, ", 80) + "}"
	err := apierrors.NewInvalid(schema.GroupKind{Group: "batch", Kind: "Job"}, "admission-init", field.ErrorList{
		field.Invalid(field.NewPath("spec", "template"), dump, "field is immutable"),
	})
	g.Expect(isImmutable(err)).To(BeTrue())
	got := classify(nil, err, "patch", ObjRef{Group: "batch", Version: "v1", Kind: "Job", Namespace: "ns", Name: "admission-init"})
	g.Expect(fault.IsPermanent(got)).To(BeTrue())
	g.Expect(got.Error()).To(HaveSuffix("invalid: spec.template: field is immutable"))
	g.Expect(got.Error()).NotTo(ContainSubstring("PodTemplateSpec"))
	g.Expect(len(got.Error())).To(BeNumerically("<", 200))
}

package deploy

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/fault"
)

func TestComposeValues(t *testing.T) {
	objs := fake.NewClientBuilder().WithObjects(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "dev"},
			Data: map[string]string{"values.yaml": "a: {b: cm, c: cm}\nlist: [1]\n"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "sec"},
			Data: map[string][]byte{"extra": []byte("a: {c: secret}\n")}},
	).Build()
	img := ImageRef{Repository: "reg/ctl", Tag: "c0ffee", Digest: "sha256:abc", Revision: "1234"}
	raw := func(s string) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: []byte(s)} }

	cases := []struct {
		name  string
		spec  v1alpha1.HelmSpec
		check func(g Gomega, vals map[string]any, err error)
	}{
		{"values then configmap then secret, maps merged, lists replaced", v1alpha1.HelmSpec{
			Values: raw(`{"a":{"b":"spec","d":"spec"},"list":[1,2]}`),
			ValuesFrom: []v1alpha1.ValuesReference{
				{Kind: "ConfigMap", Name: "dev"}, {Kind: "Secret", Name: "sec", Key: "extra"}},
		}, func(g Gomega, vals map[string]any, err error) {
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(vals).To(Equal(map[string]any{
				"a":    map[string]any{"b": "cm", "c": "secret", "d": "spec"},
				"list": []any{float64(1)},
			}))
		}},
		{"optional missing object and key skipped", v1alpha1.HelmSpec{
			ValuesFrom: []v1alpha1.ValuesReference{
				{Kind: "ConfigMap", Name: "nope", Optional: true},
				{Kind: "Secret", Name: "sec", Key: "nokey", Optional: true}},
		}, func(g Gomega, vals map[string]any, err error) {
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(vals).To(BeEmpty())
		}},
		{"missing required key is permanent and named", v1alpha1.HelmSpec{
			ValuesFrom: []v1alpha1.ValuesReference{{Kind: "Secret", Name: "sec", Key: "nokey"}},
		}, func(g Gomega, _ map[string]any, err error) {
			g.Expect(fault.IsPermanent(err)).To(BeTrue())
			g.Expect(err.Error()).To(ContainSubstring(`Secret ns/sec has no key "nokey"`))
		}},
		{"missing required object is permanent and named", v1alpha1.HelmSpec{
			ValuesFrom: []v1alpha1.ValuesReference{{Kind: "ConfigMap", Name: "nope"}},
		}, func(g Gomega, _ map[string]any, err error) {
			g.Expect(fault.IsPermanent(err)).To(BeTrue())
			g.Expect(err.Error()).To(ContainSubstring("ConfigMap ns/nope not found"))
		}},
		{"image values last, maps created", v1alpha1.HelmSpec{
			Values: raw(`{"validator":{"version":"old","keep":1},"image":"x"}`),
			ImageValues: []v1alpha1.ImageValue{
				{Image: "ctl", Path: "validator.version", From: "Revision"},
				{Image: "ctl", Path: "deep.new.ref"},
				{Image: "ctl", Path: "deep.new.tag", From: "Tag"},
				{Image: "ctl", Path: "deep.repo", From: "Repository"},
				{Image: "ctl", Path: "deep.digest", From: "Digest"},
			},
		}, func(g Gomega, vals map[string]any, err error) {
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(vals).To(Equal(map[string]any{
				"image":     "x",
				"validator": map[string]any{"version": "1234", "keep": float64(1)},
				"deep": map[string]any{"new": map[string]any{"ref": "reg/ctl@sha256:abc", "tag": "c0ffee"},
					"repo": "reg/ctl", "digest": "sha256:abc"},
			}))
		}},
		{"image path through a scalar is permanent", v1alpha1.HelmSpec{
			Values:      raw(`{"image":"x"}`),
			ImageValues: []v1alpha1.ImageValue{{Image: "ctl", Path: "image.tag"}},
		}, func(g Gomega, _ map[string]any, err error) {
			g.Expect(fault.IsPermanent(err)).To(BeTrue())
			g.Expect(err.Error()).To(ContainSubstring("image is a string"))
		}},
		{"image not built yet is retryable", v1alpha1.HelmSpec{
			ImageValues: []v1alpha1.ImageValue{{Image: "other", Path: "a"}},
		}, func(g Gomega, _ map[string]any, err error) {
			g.Expect(err).To(MatchError(ContainSubstring(`"other" has not been built`)))
			g.Expect(fault.IsPermanent(err)).To(BeFalse())
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vals, err := ComposeValues(context.Background(), objs, "ns", &tc.spec, map[string]ImageRef{"ctl": img}, ValuesFiles{})
			tc.check(NewWithT(t), vals, err)
		})
	}
}

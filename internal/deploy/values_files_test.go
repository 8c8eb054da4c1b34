package deploy

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/deploy/helm"
	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/internal/testfiles"
	"github.com/devloop-dev/devloop/test/builder"
)

// volcanoLikeSource is a source whose chart sits deep in the tree with a
// dev override next to its values, as Volcano's installer/helm does.
func volcanoLikeSource(t *testing.T) string {
	t.Helper()
	root := testfiles.Tree(t, map[string]string{
		"installer/helm/chart/volcano/Chart.yaml":        "apiVersion: v2\nname: volcano\nversion: 1.0.0\n",
		"installer/helm/chart/volcano/values.yaml":       "basic:\n  image_tag_version: latest\n  scheduler_image_name: volcanosh/vc-scheduler\ncustom:\n  scheduler_replicas: 1\n  admission_enable: true\n",
		"installer/helm/chart/volcano/values-dev.yaml":   "basic:\n  image_tag_version: dev\ncustom:\n  scheduler_replicas: 2\n",
		"installer/helm/chart/volcano/not-a-map.yaml":    "- a\n- b\n",
		"installer/helm/chart/volcano/templates/x.yaml":  "kind: ConfigMap\n",
		"installer/helm/chart/volcano/ci/test-vals.yaml": "custom: {admission_enable: false}\n",
	})
	return root
}

func composeWithFiles(spec v1alpha1.HelmSpec, files ValuesFiles) (map[string]any, error) {
	return ComposeValues(context.Background(), fake.NewClientBuilder().Build(), "ns", &spec, nil, files)
}

func TestValuesFilesLayerInOrderUnderValues(t *testing.T) {
	g := NewWithT(t)
	files := ValuesFiles{Field: "spec.components[1].helm", Read: SourceFileReader(volcanoLikeSource(t))}
	vals, err := composeWithFiles(v1alpha1.HelmSpec{
		ValuesFiles: []string{"installer/helm/chart/volcano/values.yaml", "installer/helm/chart/volcano/values-dev.yaml"},
		Values:      &apiextensionsv1.JSON{Raw: []byte(`{"custom":{"admission_enable":false}}`)},
	}, files)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vals).To(Equal(map[string]any{
		"basic":  map[string]any{"image_tag_version": "dev", "scheduler_image_name": "volcanosh/vc-scheduler"},
		"custom": map[string]any{"scheduler_replicas": float64(2), "admission_enable": false},
	}))
}

func TestValuesFilesErrorsNameTheEntry(t *testing.T) {
	root := volcanoLikeSource(t)
	outside := testfiles.Tree(t, map[string]string{"secret.yaml": "token: x\n"})
	if err := os.Symlink(filepath.Join(outside, "secret.yaml"), filepath.Join(root, "escape.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "out")); err != nil {
		t.Fatal(err)
	}
	files := ValuesFiles{Field: "spec.components[1].helm", Read: SourceFileReader(root)}
	cases := []struct {
		path, want string
	}{
		{"installer/helm/chart/volcano/values-missing.yaml", `spec.components[1].helm.valuesFiles[1]: "installer/helm/chart/volcano/values-missing.yaml" does not exist`},
		{"installer/helm/chart/volcano/not-a-map.yaml", `spec.components[1].helm.valuesFiles[1]: "installer/helm/chart/volcano/not-a-map.yaml" is not a YAML map`},
		{"installer/helm/chart/volcano", `spec.components[1].helm.valuesFiles[1]: "installer/helm/chart/volcano" cannot be read: not a regular file`},
		{"escape.yaml", `spec.components[1].helm.valuesFiles[1]: "escape.yaml" cannot be read`},
		{"out/secret.yaml", `spec.components[1].helm.valuesFiles[1]: "out/secret.yaml" cannot be read`},
		{"../x.yaml", `spec.components[1].helm.valuesFiles[1]: "../x.yaml" cannot be read`},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			g := NewWithT(t)
			_, err := composeWithFiles(v1alpha1.HelmSpec{ValuesFiles: []string{"installer/helm/chart/volcano/values.yaml", tc.path}}, files)
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
			g.Expect(fault.IsPermanent(err)).To(BeTrue())
		})
	}
}

func TestValuesFilesOfAPackagedChartAreItsOwn(t *testing.T) {
	g := NewWithT(t)
	ch, err := helm.LoadChartDir(volcanoLikeSource(t), "installer/helm/chart/volcano")
	g.Expect(err).NotTo(HaveOccurred())
	files := ValuesFiles{Field: "spec.components[0].helm", Read: helm.ChartFileReader(ch, maxValuesFileSize)}
	vals, err := composeWithFiles(v1alpha1.HelmSpec{ValuesFiles: []string{"values-dev.yaml", "./ci/test-vals.yaml"}}, files)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vals).To(Equal(map[string]any{
		"basic":  map[string]any{"image_tag_version": "dev"},
		"custom": map[string]any{"scheduler_replicas": float64(2), "admission_enable": false},
	}))
	_, err = composeWithFiles(v1alpha1.HelmSpec{ValuesFiles: []string{"installer/helm/chart/volcano/values-dev.yaml"}}, files)
	g.Expect(err).To(MatchError(ContainSubstring(`spec.components[0].helm.valuesFiles[0]: "installer/helm/chart/volcano/values-dev.yaml" does not exist`)))
}

// TestImageValuesRegistryAndName: a chart that takes the registry, the
// image's name and its tag separately (GPU Operator's operator.repository,
// operator.image, operator.version) gets the pull prefix, the name as the
// spec writes it, and the content tag.
func TestImageValuesRegistryAndName(t *testing.T) {
	g := NewWithT(t)
	// The push prefix ends in a slash: the values' repository has none.
	env := builder.Env("ns", "gpu").ImagePrefix("10.0.0.1:5000/team/").PullPrefix("localhost:5001/team").Components(
		builder.Component("operator", builder.Images(builder.Image("nvidia/gpu-operator")))).Obj()
	env.Status.Components = []v1alpha1.ComponentStatus{{Name: "operator", Images: []v1alpha1.ImageStatus{{
		Name: "nvidia/gpu-operator", Repository: "10.0.0.1:5000/team/nvidia/gpu-operator", Digest: "sha256:abc", ContentHash: "c0ffee"}}}}
	_, refs := builtImages(env)
	spec := v1alpha1.HelmSpec{ImageValues: []v1alpha1.ImageValue{
		{Image: "nvidia/gpu-operator", Path: "operator.repository", From: "Registry"},
		{Image: "nvidia/gpu-operator", Path: "operator.image", From: "Name"},
		{Image: "nvidia/gpu-operator", Path: "operator.version", From: "Tag"},
	}}
	vals, err := ComposeValues(context.Background(), fake.NewClientBuilder().Build(), "ns", &spec, refs, ValuesFiles{})
	g.Expect(err).NotTo(HaveOccurred())
	op := vals["operator"].(map[string]any)
	g.Expect(op).To(Equal(map[string]any{"repository": "localhost:5001/team", "image": "nvidia/gpu-operator", "version": "c0ffee"}))
	g.Expect(op["repository"].(string) + "/" + op["image"].(string)).To(Equal(refs["nvidia/gpu-operator"].Repository))

	env.Spec.Registry.PullPrefix = ""
	_, refs = builtImages(env)
	g.Expect(refs["nvidia/gpu-operator"].Registry).To(Equal("10.0.0.1:5000/team"), "without pullPrefix, the push prefix")
}

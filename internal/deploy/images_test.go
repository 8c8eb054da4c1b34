package deploy

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

const apiDigest = "registry.test:5000/team/api@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

var builtAPI = BuiltImage{
	Name:         "api",
	Repositories: []string{"registry.test:5000/team/api", "localhost:5001/team/api", "api"},
	Reference:    apiDigest,
}

// fromYAML decodes one object for table tests.
func fromYAML(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

func deploymentWith(images ...string) string {
	doc := "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  template:\n    spec:\n      containers:\n"
	for _, img := range images {
		doc += "      - {name: c, image: \"" + img + "\"}\n"
	}
	return doc
}

func TestRewriteImages(t *testing.T) {
	cases := []struct {
		name      string
		doc       string
		path      []string // of the containers list
		want      []string
		rewritten int
	}{
		{"push repository with tag", deploymentWith("registry.test:5000/team/api:dev"), containersOf("spec", "template", "spec"), []string{apiDigest}, 1},
		{"pull repository with digest", deploymentWith("localhost:5001/team/api@sha256:ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"), containersOf("spec", "template", "spec"), []string{apiDigest}, 1},
		{"bare name without tag", deploymentWith("api"), containersOf("spec", "template", "spec"), []string{apiDigest}, 1},
		{"docker.io spelling of the bare name", deploymentWith("docker.io/library/api:1.0"), containersOf("spec", "template", "spec"), []string{apiDigest}, 1},
		{"unrelated images untouched", deploymentWith("nginx:1.27", "registry.test:5000/team/api-sidecar:dev", "registry.test:5000/other/api"), containersOf("spec", "template", "spec"),
			[]string{"nginx:1.27", "registry.test:5000/team/api-sidecar:dev", "registry.test:5000/other/api"}, 0},
		{"template placeholder untouched", deploymentWith("${IMAGE}"), containersOf("spec", "template", "spec"), []string{"${IMAGE}"}, 0},
		{"cron job nesting", `
apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly}
spec:
  schedule: "@daily"
  jobTemplate:
    spec:
      template:
        spec:
          containers: [{name: c, image: "api:latest"}]`, containersOf("spec", "jobTemplate", "spec", "template", "spec"), []string{apiDigest}, 1},
		{"pod init containers", `
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  initContainers: [{name: i, image: "localhost:5001/team/api:dev"}]
  containers: [{name: c, image: busybox}]`, []string{"spec", "initContainers"}, []string{apiDigest}, 1},
		{"config maps ignored", `
apiVersion: v1
kind: ConfigMap
metadata: {name: cm}
data: {image: api}`, nil, nil, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			obj := fromYAML(t, tc.doc)
			n, err := RewriteImages([]*unstructured.Unstructured{obj}, []BuiltImage{builtAPI})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(n).To(Equal(tc.rewritten))
			if tc.path == nil {
				g.Expect(obj.Object["data"]).To(HaveKeyWithValue("image", "api"))
				return
			}
			g.Expect(imagesAt(t, obj, tc.path)).To(Equal(tc.want))
		})
	}
}

func TestRewriteImagesRefusesUnpinnedReference(t *testing.T) {
	g := NewWithT(t)
	_, err := RewriteImages(nil, []BuiltImage{{Name: "api", Repositories: []string{"api"}, Reference: "api:dev"}})
	g.Expect(err).To(MatchError(ContainSubstring("not digest-pinned")))
}

func containersOf(podSpec ...string) []string { return append(podSpec, "containers") }

func imagesAt(t *testing.T, obj *unstructured.Unstructured, path []string) []string {
	t.Helper()
	list, _, err := unstructured.NestedSlice(obj.Object, path...)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range list {
		out = append(out, c.(map[string]any)["image"].(string))
	}
	return out
}

package olm_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/crane"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/devloop-dev/devloop/internal/olm"
)

// projectTree is a project's tree in Operator SDK's shape (bundle/,
// catalog/package.yaml), from the fixture bundle of stakater/ipshield's
// shape.
func projectTree(t *testing.T) string {
	t.Helper()
	tree := t.TempDir()
	err := filepath.WalkDir("testdata/project-bundle", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel("testdata/project-bundle", p)
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		dst := filepath.Join(tree, "bundle", rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	pkg, err := os.ReadFile("testdata/project-package.yaml")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	NewWithT(t).Expect(os.MkdirAll(filepath.Join(tree, "catalog"), 0o755)).To(Succeed())
	NewWithT(t).Expect(os.WriteFile(filepath.Join(tree, "catalog", "package.yaml"), pkg, 0o644)).To(Succeed())
	return tree
}

// TestPublishProjectTwiceMovesTheChannelTag (issue 42, the OLM loop of
// an OLM-packaged operator): each build of the loop is published as a
// bundle of its own version in a catalog of that bundle alone, pushed
// under the channel's tag, which the printed ClusterCatalog follows; so a
// second build's publish moves the tag to a catalog naming the second
// bundle only, and the ClusterExtension (SelfCertified, on that channel)
// upgrades to it.
func TestPublishProjectTwiceMovesTheChannelTag(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	opm := opm(t)
	prefix := shieldRegistry(t)
	tree := projectTree(t)
	release := olm.ProjectRelease{Tree: tree, Prefix: prefix, Opm: opm, Drop: []string{"kube-rbac-proxy"}, Insecure: true,
		Image: prefix + "/ghcr.io/example/shield-operator@sha256:" + strings.Repeat("ab", 32), Version: "0.0.2-dev.1"}

	first, err := olm.PublishProject(ctx, release)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(first.Package).To(Equal("shield-operator"))
	g.Expect(first.CatalogTag()).To(Equal(prefix + "/shield-operator-catalog:dev"))
	g.Expect(catalogOf(t, first.CatalogTag())).To(And(ContainSubstring("image: "+first.Bundle), ContainSubstring("name: shield-operator.v0.0.2-dev.1")))

	// What installs it: the ClusterCatalog follows the tag, the
	// ClusterExtension takes the channel's newest version.
	objs := map[string]*unstructured.Unstructured{}
	for _, doc := range strings.Split(first.InstallYAML("", ""), "\n---\n") {
		u := &unstructured.Unstructured{}
		g.Expect(yaml.Unmarshal([]byte(doc), &u.Object)).To(Succeed())
		objs[u.GetKind()] = u
	}
	g.Expect(objs).To(HaveLen(5))
	ref, _, _ := unstructured.NestedString(objs["ClusterCatalog"].Object, "spec", "source", "image", "ref")
	g.Expect(ref).To(Equal(first.CatalogTag()))
	g.Expect(objs["ClusterCatalog"].GetName()).To(Equal(first.CatalogName()))
	catalog, _, _ := unstructured.NestedMap(objs["ClusterExtension"].Object, "spec", "source", "catalog")
	g.Expect(catalog).To(HaveKeyWithValue("packageName", "shield-operator"))
	g.Expect(catalog).To(HaveKeyWithValue("channels", []any{"dev"}))
	g.Expect(catalog).To(HaveKeyWithValue("upgradeConstraintPolicy", "SelfCertified"))
	g.Expect(catalog).To(HaveKeyWithValue("selector", map[string]any{"matchLabels": map[string]any{"olm.operatorframework.io/metadata.name": first.CatalogName()}}))
	g.Expect(objs["ClusterExtension"].Object["spec"]).To(HaveKeyWithValue("namespace", "shield-operator-system"))

	// The next build.
	release.Image = prefix + "/ghcr.io/example/shield-operator@sha256:" + strings.Repeat("cd", 32)
	release.Version = "0.0.2-dev.2"
	second, err := olm.PublishProject(ctx, release)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(second.Bundle).NotTo(Equal(first.Bundle))
	g.Expect(second.CatalogTag()).To(Equal(first.CatalogTag()))
	now := catalogOf(t, second.CatalogTag())
	g.Expect(now).To(And(ContainSubstring("image: "+second.Bundle), ContainSubstring("name: shield-operator.v0.0.2-dev.2")))
	g.Expect(now).NotTo(ContainSubstring(first.Bundle))
}

// catalogOf is the catalog.yaml of the catalog image ref.
func catalogOf(t *testing.T, ref string) string {
	t.Helper()
	img, err := crane.Pull(ref, crane.Insecure)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	var out strings.Builder
	NewWithT(t).Expect(crane.Export(img, &out)).To(Succeed())
	i := strings.Index(out.String(), "schema: olm.package")
	NewWithT(t).Expect(i).To(BeNumerically(">=", 0), "no olm.package in %s", ref)
	return out.String()
}

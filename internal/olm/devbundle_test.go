package olm_test

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/crane"
	"github.com/google/go-containerregistry/pkg/registry"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	"github.com/devloop-dev/devloop/internal/olm"
	"github.com/devloop-dev/devloop/internal/testenv"
)

// opm is the opm hack/opm.sh builds (make test builds it).
func opm(t *testing.T) string {
	t.Helper()
	p := filepath.Join(testenv.RepoRoot(), "bin", "opm", "v1.73.0", "opm")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("no opm at %s: run hack/opm.sh", p)
	}
	return p
}

// TestProjectBundleAndCatalogForTheLoop (issue 42, the OLM-packaged
// operator): a project's committed registry+v1 bundle (Operator SDK's
// shape, as stakater/ipshield's) is made to run the image the loop built,
// under a development version, without the sidecar the nodes cannot
// pull; pushed as a bundle image labelled from its annotations; and a
// file-based catalog of it in the project's catalog shape (package.yaml,
// one channel, the bundle as opm renders it) passes `opm validate` and is
// pushed as a catalog image catalogd reads.
func TestProjectBundleAndCatalogForTheLoop(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	opm := opm(t)
	prefix := shieldRegistry(t)
	built := prefix + "/ghcr.io/example/shield-operator@sha256:" + strings.Repeat("ab", 32)

	files, pkg, err := olm.DevBundle("testdata/project-bundle", olm.DevBundleOptions{
		Version: "0.0.2-dev", Channel: "dev", Images: map[string]string{"manager": built}, Drop: []string{"kube-rbac-proxy"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pkg).To(Equal("shield-operator"))
	var csv struct {
		Metadata struct {
			Name        string
			Annotations map[string]string
		}
		Spec struct {
			Version  string
			Replaces string
			Install  struct {
				Spec struct {
					Deployments []struct {
						Spec struct {
							Template struct {
								Spec struct {
									Containers []struct{ Name, Image string }
								}
							}
						}
					}
				}
			}
		}
	}
	g.Expect(yaml.Unmarshal(files["manifests/shield-operator.clusterserviceversion.yaml"], &csv)).To(Succeed())
	g.Expect(csv.Metadata.Name).To(Equal("shield-operator.v0.0.2-dev"))
	g.Expect(csv.Metadata.Annotations["containerImage"]).To(Equal(built))
	g.Expect(csv.Spec.Version).To(Equal("0.0.2-dev"))
	g.Expect(csv.Spec.Replaces).To(BeEmpty(), "the development catalog has this bundle alone")
	containers := csv.Spec.Install.Spec.Deployments[0].Spec.Template.Spec.Containers
	g.Expect(containers).To(HaveLen(1))
	g.Expect(containers[0].Name).To(Equal("manager"))
	g.Expect(containers[0].Image).To(Equal(built))
	g.Expect(string(files["metadata/annotations.yaml"])).To(ContainSubstring("operators.operatorframework.io.bundle.channels.v1: dev"))
	g.Expect(files).To(HaveKey("manifests/example.com_shields.yaml"))

	dir := t.TempDir()
	g.Expect(olm.WriteDir(filepath.Join(dir, "bundle"), files)).To(Succeed())
	bundle, err := olm.PushProjectBundle(ctx, filepath.Join(dir, "bundle"), prefix, pkg+"-bundle", "v0.0.2-dev", true)
	g.Expect(err).NotTo(HaveOccurred())
	cfg, err := crane.Config(bundle, crane.Insecure)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(cfg)).To(ContainSubstring(`"operators.operatorframework.io.bundle.package.v1":"shield-operator"`))

	pkgYAML, err := os.ReadFile("testdata/project-package.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	fbc, err := olm.RenderProjectCatalog(ctx, opm, pkgYAML, "dev", bundle, true)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(fbc)).To(ContainSubstring("defaultChannel: dev"))
	g.Expect(string(fbc)).To(ContainSubstring("image: " + bundle))
	g.Expect(string(fbc)).To(ContainSubstring("- name: shield-operator.v0.0.2-dev"))
	catalog := filepath.Join(dir, "catalog")
	g.Expect(olm.WriteDir(filepath.Join(catalog, pkg), map[string][]byte{"catalog.yaml": fbc})).To(Succeed())
	g.Expect(olm.ValidateCatalog(ctx, opm, catalog)).To(Succeed())

	ref, err := olm.PushProjectCatalog(ctx, catalog, pkg, prefix, pkg+"-catalog", "dev", true)
	g.Expect(err).NotTo(HaveOccurred())
	cfg, err = crane.Config(ref, crane.Insecure)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(cfg)).To(ContainSubstring(`"` + olm.CatalogConfigsLabel + `":"/configs"`))

	// The check can fail: a channel naming a bundle the catalog does not
	// have is refused.
	broken := filepath.Join(dir, "broken")
	g.Expect(olm.WriteDir(filepath.Join(broken, pkg), map[string][]byte{"catalog.yaml": []byte(strings.Replace(string(fbc),
		"- name: shield-operator.v0.0.2-dev", "- name: shield-operator.v9.9.9", 1))})).To(Succeed())
	g.Expect(olm.ValidateCatalog(ctx, opm, broken)).To(MatchError(ContainSubstring("opm validate")))
}

// TestProjectBundleNamesAContainerItDoesNotHave: an image for a container
// the CSV does not run is an error naming it, not a bundle that still
// runs the released image.
func TestProjectBundleNamesAContainerItDoesNotHave(t *testing.T) {
	_, _, err := olm.DevBundle("testdata/project-bundle", olm.DevBundleOptions{Version: "0.0.2", Images: map[string]string{"operator": "x"}})
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring(`no container "operator"`)))
}

// shieldRegistry serves a real registry for the test and returns the
// repository prefix the project's images are pushed under.
func shieldRegistry(t *testing.T) string {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://") + "/shield"
}

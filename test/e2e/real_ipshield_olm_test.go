//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/devcluster"
	olmpublish "github.com/devloop-dev/devloop/internal/olm"
	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/test/e2e/poll"
)

// ipshieldTreeVar names a checkout of github.com/stakater/ipshield
// (b2e67d5): the Go module proxy does not serve it, so CI has no tree.
const ipshieldTreeVar = "DEVLOOP_IPSHIELD_TREE"

// ipshieldImage is the operator image of config/samples/olm-operator.yaml.
const ipshieldImage = "ghcr.io/stakater/ipshield-operator"

// The Deployment the CSV installs, its pod labels, and where.
const (
	ipshieldNamespace  = "ipshield-operator-system"
	ipshieldDeployment = "ipshield-operator-controller-manager"
)

var ipshieldPodLabels = map[string]string{"control-plane": "controller-manager"}

// TestRealIPShieldOLM runs the OLM-packaged operator's loop (USE-CASES.md
// #5, the TitanML case) on stakater/ipshield's real tree with real OLM v1
// controllers (issue 42): config/samples/olm-operator.yaml builds the
// operator image in the cluster and applies the Route CRD it needs; the
// tree's own bundle, made to run that image under a development version,
// and a catalog of it are pushed (olm.PublishProject, what
// hack/projectolm does); a ClusterCatalog and a ClusterExtension install
// it, and the operator OLM deployed runs the built digest and starts its
// controller. Then an edit: pushed, rebuilt, published under the next
// version, and the ClusterExtension upgrades to a pod that logs the
// edited line. Figures are logged with the load. `make
// real-ipshield-olm IPSHIELD_TREE=DIR` runs it; `make e2e` skips it.
func TestRealIPShieldOLM(t *testing.T) {
	if os.Getenv("DEVLOOP_E2E_REAL") == "skip" {
		t.Skip("the real projects' loops run by `make real-projects` and `make real-ipshield-olm`")
	}
	src := os.Getenv(ipshieldTreeVar)
	if src == "" {
		t.Skip(ipshieldTreeVar + " is not set: a checkout of github.com/stakater/ipshield (make real-ipshield-olm IPSHIELD_TREE=DIR)")
	}
	c := need(t)
	start := time.Now()
	needOLM(t)
	t.Logf("OLM v1 ready in %s", time.Since(start).Round(time.Second))
	g := NewWithT(t)
	ctx := context.Background()
	tree := copyDir(t, src)
	goproxy := hostGoProxy(t, tree)
	routeCRD := routeCRDDir(t, tree)
	opm := opmBinary(t)

	ns := namespace(t, "e2e-ipshield")
	allowClusterAdmin(t, ns, "deployer")
	env := localIPShield(t, ns, goproxy)
	key := client.ObjectKeyFromObject(env)
	deleteOnCleanup(t, env)
	t.Logf("load before: %s", loadAverage())
	for name, dir := range map[string]string{"src": tree, "route-crd": routeCRD} {
		ref := sourceRef(t, env, name)
		_, err := devcluster.PushSource(ctx, dir, ref)
		g.Expect(err).NotTo(HaveOccurred(), "pushing %s", ref)
	}

	// Cold: the image built, the bundle and catalog of it published, OLM
	// installs it.
	start = time.Now()
	g.Expect(c.Client.Create(ctx, env)).To(Succeed())
	env = waitEnv(t, key, 60*time.Minute, false, readyNow)
	built := builtRef(env)
	t.Logf("environment Ready (operator image %s built, Route CRD applied) %s after the apply; load %s",
		built, time.Since(start).Round(time.Second), loadAverage())
	pub := publishIPShield(t, tree, ns, built, opm, 1)
	install := pub.InstallYAML(ipshieldNamespace, "")
	removeOnCleanup(t, install)
	g.Expect(c.ApplyOLMYAML(ctx, install)).To(Succeed())
	waitCatalogServing(t, pub.CatalogName(), pub.Catalog)
	waitExtension(t, pub.Package, ipshieldVersion(1))
	pod := waitIPShieldOperator(t, built, "Starting workers")
	cold := time.Since(start)
	t.Logf("first Ready, cold: ClusterExtension installed %s, operator pod %s on the built digest started its controller %s after the apply; load %s",
		ipshieldVersion(1), pod, cold.Round(time.Second), loadAverage())

	// Edit → new operator running, through the loop and OLM.
	mark := editIPShield(t, tree, 1)
	start = time.Now()
	push(t, env, tree)
	env = waitEnv(t, key, 30*time.Minute, false, func(g Gomega, cur *v1alpha1.DevEnvironment) {
		readyNow(g, cur)
		g.Expect(builtRef(cur)).NotTo(Equal(built))
	})
	rebuilt := time.Since(start)
	built = builtRef(env)
	pub = publishIPShield(t, tree, ns, built, opm, 2)
	published := time.Since(start)
	waitCatalogServing(t, pub.CatalogName(), pub.Catalog)
	waitExtension(t, pub.Package, ipshieldVersion(2))
	newPod := waitIPShieldOperator(t, built, mark)
	g.Expect(newPod).NotTo(Equal(pod), "the upgrade replaces the operator's pod")
	edit := time.Since(start)
	t.Logf("ipshield through OLM figures: first Ready cold %s; edit → new operator logging the edit %s (image rebuilt %s, published %s, the rest catalogd's poll and OLM's upgrade); load %s",
		cold.Round(time.Second), edit.Round(100*time.Millisecond), rebuilt.Round(100*time.Millisecond),
		published.Round(100*time.Millisecond), loadAverage())

	warm := warmIPShieldBuild(t, env, tree, goproxy)
	suiteCold := runSuite(t, key, "unit-tests", 1)
	suiteWarm := runSuite(t, key, "unit-tests", 2)
	t.Logf("ipshield figures: first Ready warm (second environment, first's cache) %s; unit suite cold %s, warm %s; load %s",
		warm.Round(time.Second), suiteCold.Round(time.Second), suiteWarm.Round(time.Second), loadAverage())
}

// warmIPShieldBuild builds the operator's image in a second environment
// reading the first one's build cache (warmBuild). Only the image.
func warmIPShieldBuild(t *testing.T, first *v1alpha1.DevEnvironment, tree, goproxy string) time.Duration {
	t.Helper()
	envB := localIPShield(t, namespace(t, "e2e-ipshield-b"), goproxy)
	var manager v1alpha1.Component
	for _, c := range envB.Spec.Components {
		if c.Name == "manager" {
			manager = c
		}
	}
	manager.DependsOn = nil
	envB.Spec.Components = []v1alpha1.Component{manager}
	envB.Spec.Sources = envB.Spec.Sources[:1] // src
	return warmBuild(t, first, envB, tree)
}

// localIPShield is config/samples/olm-operator.yaml on the local cluster,
// for the OLM loop: sources and images under ns on the cluster's registry,
// the cluster's builder and base (nodes pull from no public registry; the
// base is busybox, so the image names the distroless base's user, which
// the CSV's runAsNonRoot needs), modules from the host (goproxy), and the
// operator component only builds: OLM deploys it, as the sample says.
func localIPShield(t *testing.T, ns, goproxy string) *v1alpha1.DevEnvironment {
	t.Helper()
	env := readSample(t, "olm-operator.yaml")
	env.Namespace = ns
	env.Spec.ServiceAccountName = "deployer"
	env.Spec.Registry = &v1alpha1.RegistrySpec{Prefix: registry + "/" + ns, Insecure: true}
	for i := range env.Spec.Sources {
		s := &env.Spec.Sources[i]
		s.OCI = &v1alpha1.OCISource{Repository: registry + "/" + ns + "/" + s.Name, Tag: "dev", Insecure: true}
	}
	var manager *v1alpha1.Component
	for i := range env.Spec.Components {
		if env.Spec.Components[i].Name == "manager" {
			manager = &env.Spec.Components[i]
		}
	}
	if manager == nil || len(manager.Images) != 1 || manager.Images[0].Name != ipshieldImage {
		t.Fatalf("config/samples/olm-operator.yaml: no manager component building %s", ipshieldImage)
	}
	manager.Manifests = nil
	img := &manager.Images[0]
	img.Base = busybox
	img.User = "65532:65532"
	img.Run.Image = goImage
	img.Run.Env = append(img.Run.Env, v1alpha1.EnvVar{Name: "GOPATH", Value: "/go"}, v1alpha1.EnvVar{Name: "GOPROXY", Value: goproxy},
		v1alpha1.EnvVar{Name: "GOSUMDB", Value: "off"}, v1alpha1.EnvVar{Name: "GOTOOLCHAIN", Value: "local"})
	if len(env.Spec.Tests) != 1 {
		t.Fatalf("config/samples/olm-operator.yaml: want its one unit suite, have %d suites", len(env.Spec.Tests))
	}
	suite := &env.Spec.Tests[0]
	suite.Image = v1alpha1.TestImage{Ref: goImage}
	suite.Env = append(suite.Env, v1alpha1.EnvVar{Name: "GOPROXY", Value: goproxy},
		v1alpha1.EnvVar{Name: "GOSUMDB", Value: "off"}, v1alpha1.EnvVar{Name: "GOTOOLCHAIN", Value: "local"})
	return env
}

// sourceRef is the pushed reference of the environment's source name.
func sourceRef(t *testing.T, env *v1alpha1.DevEnvironment, name string) string {
	t.Helper()
	for _, s := range env.Spec.Sources {
		if s.Name == name {
			return s.OCI.Repository + ":" + s.OCI.Tag
		}
	}
	t.Fatalf("no source %s", name)
	return ""
}

// builtRef is the operator image the environment built, repository@digest.
func builtRef(env *v1alpha1.DevEnvironment) string {
	img := imageOf(env, ipshieldImage)
	if img == nil || img.Digest == "" {
		return ""
	}
	return img.Repository + "@" + img.Digest
}

// routeCRDDir is a directory holding the Route CRD the operator needs off
// OpenShift, from the openshift/api module the tree requires (in the
// host's module cache after hostGoProxy's download).
func routeCRDDir(t *testing.T, tree string) string {
	t.Helper()
	list := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/openshift/api")
	list.Dir = tree
	list.Env = append(os.Environ(), "GOFLAGS=", "GOTOOLCHAIN=local")
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list -m github.com/openshift/api in the tree: %v", err)
	}
	const file = "route/v1/zz_generated.crd-manifests/routes-Default.crd.yaml"
	data, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), file))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "routes.crd.yaml"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// opmBinary is hack/opm.sh's opm (built once, cached under bin/opm).
func opmBinary(t *testing.T) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "opm.sh"))
	cmd.Dir = testenv.RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/opm.sh: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// ipshieldVersion is the development bundle's version of build n.
func ipshieldVersion(n int) string { return fmt.Sprintf("0.0.6-dev.%d", n) }

// publishIPShield publishes build n (the built image) as bundle and
// catalog images under ns, as hack/projectolm does.
func publishIPShield(t *testing.T, tree, ns, built, opm string, n int) *olmpublish.PublishedProject {
	t.Helper()
	start := time.Now()
	pub, err := olmpublish.PublishProject(context.Background(), olmpublish.ProjectRelease{Tree: tree, Prefix: registry + "/" + ns,
		Image: built, Version: ipshieldVersion(n), Opm: opm, Drop: []string{"kube-rbac-proxy"}, Insecure: true})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	t.Logf("bundle %s and catalog %s published in %s", pub.Bundle, pub.Catalog, time.Since(start).Round(time.Millisecond))
	return pub
}

// removeOnCleanup deletes what install applied when the test ends: the
// ClusterExtension first, waiting until OLM uninstalled what it installed
// (as the installer ServiceAccount, which goes after it), then the rest.
func removeOnCleanup(t *testing.T, install string) {
	t.Helper()
	var objs []client.Object
	for _, doc := range strings.Split(install, "\n---\n") {
		u := &unstructured.Unstructured{}
		NewWithT(t).Expect(yaml.Unmarshal([]byte(doc), &u.Object)).To(Succeed())
		objs = append(objs, u)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		start := time.Now()
		for _, o := range slices.Backward(objs) {
			_ = dc.Client.Delete(ctx, o)
			if o.GetObjectKind().GroupVersionKind() != clusterExtensionGVK {
				continue
			}
			waitFor(t, poll.Wait{What: "ClusterExtension " + o.GetName() + " uninstalled", Every: 500 * time.Millisecond, Within: 3 * time.Minute},
				poll.Succeeds(func(ctx context.Context) error {
					if err := dc.Client.Get(ctx, client.ObjectKeyFromObject(o), unstructuredObject(clusterExtensionGVK, "", o.GetName())); !apierrors.IsNotFound(err) {
						return errStillThere
					}
					return nil
				}))
		}
		t.Logf("cleanup: the ClusterExtension, ClusterCatalog, installer and %s removed in %s", ipshieldNamespace, time.Since(start).Round(time.Millisecond))
	})
}

// waitIPShieldOperator waits until the operator OLM installed runs image
// in one Ready pod that logged want, and returns that pod's name.
func waitIPShieldOperator(t *testing.T, image, want string) string {
	t.Helper()
	// Both waits share the one 10-minute bound, from the same start.
	w := poll.Wait{What: "the OLM-installed ipshield operator's Deployment on " + image, Every: time.Second, Within: 10 * time.Minute, Since: time.Now()}
	waitFor(t, w, func(ctx context.Context) (string, bool, error) {
		d := &appsv1.Deployment{}
		if err := dc.Client.Get(ctx, client.ObjectKey{Namespace: ipshieldNamespace, Name: ipshieldDeployment}, d); err != nil {
			return err.Error(), false, nil
		}
		failure, ok := poll.Assertions(func(g Gomega) {
			g.Expect(d.Spec.Template.Spec.Containers).To(HaveLen(1), "the bundle without kube-rbac-proxy")
			g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal(image))
		})
		return failure, ok, nil
	})
	w.What = "the OLM-installed ipshield operator on " + image + " logging " + want
	return waitPodLogging(t, w, ipshieldNamespace, ipshieldPodLabels, "manager", func(i string) bool { return i == image }, want)
}

// editIPShield changes the operator's start-up log line, an edit whose new
// code shows in the new pod's log.
func editIPShield(t *testing.T, tree string, n int) string {
	t.Helper()
	path := filepath.Join(tree, "cmd", "main.go")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	mark := fmt.Sprintf("devloop edit %d", n)
	const line = `setupLog.Info("starting manager")`
	if !strings.Contains(string(data), line) {
		t.Fatalf("%s: no %s to edit", path, line)
	}
	edited := strings.Replace(string(data), line, fmt.Sprintf(`setupLog.Info("starting manager", "edit", %q)`, mark), 1)
	if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	return mark
}

package deploy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/deploy/helm"
	"github.com/devloop-dev/devloop/internal/identity"
	"github.com/devloop-dev/devloop/internal/metrics"
	"github.com/devloop-dev/devloop/internal/source"
	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/test/builder"
)

// dirSource serves one directory as every source.
type dirSource struct{ dir string }

func (s dirSource) Ref(string) (source.Ref, bool) { return source.Ref{}, true }
func (s dirSource) Artifact(context.Context, string) (*source.Artifact, error) {
	return &source.Artifact{Dir: s.dir}, nil
}

// countedEngine is a deploy engine whose every request, as the
// environment's deployer (a ServiceAccount with every right in its new
// namespace), is counted by internal/metrics. It returns the engine, an
// environment in that namespace with one component c and a reconcile of
// that component, failing the test on an error.
type countedEngine struct {
	t   testing.TB
	e   *Engine
	id  *identity.Identity
	env *v1alpha1.DevEnvironment
	src source.Resolved
	// requests counts the requests made through its config.
	requests *metrics.Requests
	// snapshots reads unchanged objects as the reconciler does, with a
	// LIST per namespace and kind (WithObjectSnapshots).
	snapshots bool
}

func newCountedEngine(t testing.TB, c v1alpha1.Component, src source.Resolved) *countedEngine {
	t.Helper()
	ctx := context.Background()
	ns := fmt.Sprintf("noop-%d", time.Now().UnixNano())
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	if err := testenv.CreateDeployer(ctx, k8s, ns, "deployer"); err != nil {
		t.Fatal(err)
	}
	counted := rest.CopyConfig(cfg)
	requests := metrics.CountRequests(counted)
	hc, err := rest.HTTPClientFor(counted)
	if err != nil {
		t.Fatal(err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(counted, hc)
	if err != nil {
		t.Fatal(err)
	}
	env := builder.Env(ns, "noop").ServiceAccount("deployer").Components(c).Obj()
	env.UID = types.UID("uid-" + ns)
	env.Status.Components = []v1alpha1.ComponentStatus{{Name: c.Name}}
	return &countedEngine{t: t, src: src, env: env, requests: requests,
		e:  &Engine{Mapper: mapper, Charts: &ChartLoader{CacheDir: t.TempDir()}},
		id: &identity.Identity{Config: counted, Mapper: mapper, Scheme: testenv.Scheme()}}
}

// reconcile reconciles the component with a new tenant, as each
// reconcile of the operator does, and returns its result and the
// requests it made.
func (ce *countedEngine) reconcile() (Result, metrics.Snapshot) {
	ce.t.Helper()
	before := ce.requests.Snapshot()
	ctx := context.Background()
	if ce.snapshots {
		ctx = WithObjectSnapshots(ctx)
	}
	res, err := ce.e.reconcileComponent(ctx, ce.env, &ce.env.Spec.Components[0], &ce.env.Status.Components[0], ce.id.For(ce.env), ce.src, nil)
	if err != nil {
		ce.t.Fatal(err)
	}
	return res, ce.requests.Snapshot().Sub(before)
}

func (ce *countedEngine) status() *v1alpha1.ComponentStatus { return &ce.env.Status.Components[0] }

// writeWebManifests writes a ConfigMap and a Deployment under dir/app.
func writeWebManifests(t *testing.T, dir string) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(os.MkdirAll(filepath.Join(dir, "app"), 0o755)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(dir, "app", "config.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {mode: fast}\n"), 0o644)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(dir, "app", "deployment.yaml"), []byte(`apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: registry.test/web:1}]
`), 0o644)).To(Succeed())
}

// TestSnapshotsListOnceOrGet: with the reconciler's snapshots, an
// unchanged component's objects are read with one LIST per kind; a
// ServiceAccount that may get but not list is served by GETs, as Ready.
func TestSnapshotsListOnceOrGet(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	dir := t.TempDir()
	writeWebManifests(t, dir)
	ce := newCountedEngine(t, v1alpha1.Component{Name: "app", Manifests: &v1alpha1.ManifestsSpec{Source: "app", Paths: []string{"app"}}}, dirSource{dir})
	ce.snapshots = true
	ns := ce.env.Namespace
	ce.reconcile()
	markAvailable(t, ns, "web")
	ce.reconcile()
	res, noop := ce.reconcile()
	g.Expect(res.Phase).To(Equal(v1alpha1.PhaseReady), res.Message)
	g.Expect(noop[metrics.VerbList]).To(Equal(int64(2)), "a ConfigMap list and a Deployment list: %v", noop)
	g.Expect(noop.Reads()).To(Equal(int64(2)), "%v", noop)

	role := &rbacv1.Role{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "deployer"}, role)).To(Succeed())
	role.Rules = []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"get", "create", "update", "patch", "delete"}}}
	g.Expect(k8s.Update(ctx, role)).To(Succeed())
	g.Eventually(func(g Gomega) {
		res, noop := ce.reconcile()
		g.Expect(res.Phase).To(Equal(v1alpha1.PhaseReady), res.Message)
		g.Expect(noop[metrics.VerbGet]).To(Equal(int64(2)), "refused lists, then a GET each: %v", noop)
	}).Should(Succeed())
}

// TestUnchangedManifestsAreOnlyRead: once its objects were found as
// wanted, a no-op reconcile of a manifests component reads each object
// once (readiness) and writes nothing, dry runs included; a hand edit or
// a deletion is still found and put back at the next reconcile.
func TestUnchangedManifestsAreOnlyRead(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	dir := t.TempDir()
	writeWebManifests(t, dir)
	ce := newCountedEngine(t, v1alpha1.Component{Name: "app", Manifests: &v1alpha1.ManifestsSpec{Source: "app", Paths: []string{"app"}}}, dirSource{dir})
	ns := ce.env.Namespace

	_, applied := ce.reconcile()
	g.Expect(applied.Writes()).To(BeNumerically(">=", 2), "the first reconcile applies: %v", applied)
	markAvailable(t, ns, "web")
	res, confirm := ce.reconcile()
	g.Expect(res.Phase).To(Equal(v1alpha1.PhaseReady), res.Message)
	g.Expect(confirm.Writes()).To(BeZero(), "found as wanted, nothing is applied again: %v", confirm)
	g.Expect(confirm[metrics.VerbDryRun]).To(Equal(int64(2)), "the first check after an apply asks the dry run")

	res, noop := ce.reconcile()
	g.Expect(res.Phase).To(Equal(v1alpha1.PhaseReady), res.Message)
	g.Expect(res.Message).To(Equal("2 objects applied, all Current"), "the message of an apply, so status does not change")
	g.Expect(noop.Writes()+noop[metrics.VerbDryRun]).To(BeZero(), "%v", noop)
	g.Expect(noop[metrics.VerbGet]).To(Equal(int64(2)), "one read per object, for readiness: %v", noop)
	g.Expect(noop.Reads()).To(Equal(int64(2)), "%v", noop)

	// A hand edit moves the ConfigMap's resourceVersion: drift is looked
	// for, reported and corrected.
	cm := &corev1.ConfigMap{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "settings"}, cm)).To(Succeed())
	cm.Data["mode"] = "slow"
	g.Expect(k8s.Update(ctx, cm)).To(Succeed())
	_, corrected := ce.reconcile()
	g.Expect(ce.status().Drift).To(ConsistOf(ContainSubstring("configmaps/settings: data.mode changed by hand")))
	g.Expect(corrected.Writes()).To(BeNumerically(">=", 1))
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "settings"}, cm)).To(Succeed())
	g.Expect(cm.Data).To(HaveKeyWithValue("mode", "fast"))
	ce.reconcile() // finds it as wanted again
	g.Expect(ce.status().Drift).To(BeEmpty())
	_, noop = ce.reconcile()
	g.Expect(noop.Writes()+noop[metrics.VerbDryRun]).To(BeZero(), "%v", noop)

	// Deleted by hand: created again.
	g.Expect(k8s.Delete(ctx, cm)).To(Succeed())
	ce.reconcile()
	g.Expect(ce.status().Drift).To(ConsistOf(ContainSubstring("settings: deleted by hand")))
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "settings"}, cm)).To(Succeed())
}

// TestUnchangedReleaseSkipsHelm: a release whose chart and values are
// unchanged is not handed to Helm (no history listed, nothing written);
// its storage Secret and objects are read. A rollback or an uninstall
// done behind devloop's back is still seen and undone at the next
// reconcile.
func TestUnchangedReleaseSkipsHelm(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	charts := testenv.FeatureCharts()
	values := func(v string) *apiextensionsv1.JSON {
		return &apiextensionsv1.JSON{Raw: []byte(`{"version":"` + v + `"}`)}
	}
	ce := newCountedEngine(t, v1alpha1.Component{Name: "web", Helm: &v1alpha1.HelmSpec{
		Chart: v1alpha1.ChartRef{Source: "app", Path: "web"}, Values: values("one")}}, dirSource{charts})
	ns := ce.env.Namespace
	version := func() string {
		cm := &corev1.ConfigMap{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-version"}, cm)).To(Succeed())
		return cm.Data["version"]
	}
	ce.reconcile()
	ce.env.Spec.Components[0].Helm.Values = values("two")
	ce.reconcile()
	g.Expect(ce.status().Release.Revision).To(Equal(2))
	markAvailable(t, ns, "web")
	res, _ := ce.reconcile()
	g.Expect(res.Phase).To(Equal(v1alpha1.PhaseReady), res.Message)

	res, noop := ce.reconcile()
	g.Expect(res.Phase).To(Equal(v1alpha1.PhaseReady), res.Message)
	g.Expect(res.Message).To(Equal("release web revision 2 deployed, all Current"))
	g.Expect(noop.Writes()+noop[metrics.VerbDryRun]).To(BeZero(), "%v", noop)
	g.Expect(noop[metrics.VerbDiscovery]).To(BeZero(), "no Helm action configuration: %v", noop)
	g.Expect(noop[metrics.VerbList]).To(Equal(int64(1)), "the release's storage, as metadata: %v", noop)
	g.Expect(noop[metrics.VerbGet]).To(Equal(int64(2)), "the two objects: %v", noop)

	// Rolled back by hand to revision 1: revision 3 has revision 1's
	// values, and devloop upgrades to its own again.
	admin, err := helm.NewConfigFactory(cfg, "")(ns)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(helm.Rollback(admin, 1, helm.ActionOptions{ReleaseName: "web", Namespace: ns})).To(Succeed())
	g.Expect(version()).To(Equal("one"))
	ce.reconcile()
	g.Expect(ce.status().Release.Revision).To(Equal(4))
	g.Expect(version()).To(Equal("two"))

	// Uninstalled by hand: installed again.
	_, err = helm.Uninstall(admin, helm.ActionOptions{ReleaseName: "web", Namespace: ns})
	g.Expect(err).NotTo(HaveOccurred())
	cm := &corev1.ConfigMap{}
	g.Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-version"}, cm))).To(BeTrue())
	ce.reconcile()
	g.Expect(ce.status().Release.Revision).To(Equal(1))
	g.Expect(version()).To(Equal("two"))
}

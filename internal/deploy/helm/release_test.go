package helm

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	helmtime "helm.sh/helm/v3/pkg/time"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/internal/identity"
	"github.com/devloop-dev/devloop/internal/testenv"
)

// adminRelease is a request to release one of the deploy engine's test
// charts as name, as an administrator, in a namespace of its own.
func adminRelease(t *testing.T, name, chart string, values map[string]any) ReleaseRequest {
	t.Helper()
	return ReleaseRequest{
		Configs: NewConfigFactory(cfg, ""), ReleaseName: name, Namespace: testenv.Namespace(t, k8s, "helm-"),
		Chart: testChart(t, chart), Values: values,
	}
}

func testChart(t *testing.T, name string) *chart.Chart {
	t.Helper()
	ch, err := LoadChartDir(testenv.DeployCharts(), name)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// labelAll is the mutator of these tests: it marks every rendered object.
func labelAll(objs []*unstructured.Unstructured) error {
	for _, o := range objs {
		l := o.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		l["devloop.dev/mutated"] = "true"
		o.SetLabels(l)
	}
	return nil
}

func TestReleaseLifecycle(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	vals := map[string]any{"validator": map[string]any{"version": "abc123"}}
	req := adminRelease(t, "demo", "demo", vals)
	req.Mutate = labelAll
	ns := req.Namespace

	out, err := ReconcileRelease(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.Actions).To(Equal([]Action{ActionInstall}))
	g.Expect(out.Release.Revision).To(Equal(1))
	g.Expect(out.Release.Status).To(Equal(string(release.StatusDeployed)))
	g.Expect(out.Observed).NotTo(BeEmpty())

	var dep appsv1.Deployment
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-app"}, &dep)).To(Succeed())
	g.Expect(dep.Labels).To(HaveKeyWithValue("devloop.dev/mutated", "true"))
	cr := &unstructured.Unstructured{}
	cr.SetGroupVersionKind(schema.GroupVersionKind{Group: "demo.devloop.dev", Version: "v1", Kind: "Validator"})
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-validator"}, cr)).To(Succeed())
	g.Expect(cr.Object["spec"]).To(HaveKeyWithValue("version", "abc123"))
	g.Expect(cr.GetLabels()).To(HaveKeyWithValue("devloop.dev/mutated", "true"))

	out, err = ReconcileRelease(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.Actions).To(BeEmpty(), "unchanged chart and values upgrade nothing")
	g.Expect(out.Release.Revision).To(Equal(1))

	req.Values = map[string]any{"validator": map[string]any{"version": "def456"}, "replicas": 2}
	out, err = ReconcileRelease(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.Actions).To(Equal([]Action{ActionUpgrade}))
	g.Expect(out.Release.Revision).To(Equal(2))
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-validator"}, cr)).To(Succeed())
	g.Expect(cr.Object["spec"]).To(HaveKeyWithValue("version", "def456"))

	good := out.Digest
	req.Values = map[string]any{"broken": true}
	out, err = ReconcileRelease(ctx, req)
	g.Expect(err).To(HaveOccurred())
	g.Expect(fault.IsPermanent(err)).To(BeFalse())
	g.Expect(out.Actions).To(Equal([]Action{ActionUpgrade, ActionRollback}))
	g.Expect(out.FailedAction).To(Equal(ActionUpgrade))
	g.Expect(out.Failure).To(Equal(FailureAction))
	g.Expect(out.Release.Revision).To(Equal(4))
	g.Expect(out.Release.Status).To(Equal(string(release.StatusDeployed)))
	g.Expect(out.Release.Digest).To(Equal(digestLabel(good)), "rolled back to revision 2's chart and values")

	cfg, err := req.Configs(ns)
	g.Expect(err).NotTo(HaveOccurred())
	hist, err := History(cfg, "demo", 0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(len(hist)).To(BeNumerically("<=", DefaultMaxHistory))
}

func TestFailedInstall(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	req := adminRelease(t, "hooks", "hookfail", map[string]any{})
	ns := req.Namespace

	// The hook fails: install, then uninstall to leave a clean slate; no
	// second install in the same call.
	out, err := ReconcileRelease(ctx, req)
	g.Expect(err).To(MatchError(ContainSubstring("Invalid_Hook_Name")))
	g.Expect(fault.IsPermanent(err)).To(BeFalse(), "hook failures are counted by the caller")
	g.Expect(out.Actions).To(Equal([]Action{ActionInstall, ActionUninstall}))
	g.Expect(out.Failure).To(Equal(FailureHook))

	// A failed install left by someone else is uninstalled, then installed.
	cfg, err := req.Configs(ns)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = Install(ctx, cfg, req.Chart, nil, ActionOptions{ReleaseName: "hooks", Namespace: ns})
	g.Expect(err).To(HaveOccurred())
	last, err := LastRelease(cfg, "hooks")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(last.Info.Status).To(Equal(release.StatusFailed))

	req.Values = map[string]any{"failHook": false}
	out, err = ReconcileRelease(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.Actions).To(Equal([]Action{ActionUninstall, ActionInstall}))
	g.Expect(out.Release.Status).To(Equal(string(release.StatusDeployed)))
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "hooks-config"}, &corev1.ConfigMap{})).To(Succeed())
}

func TestPendingInstallRecovered(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	req := adminRelease(t, "stuck", "hookfail", map[string]any{"failHook": false})
	ns := req.Namespace
	// An operator that died mid-install leaves this behind.
	cfg, err := req.Configs(ns)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.Releases.Create(&release.Release{
		Name: "stuck", Namespace: ns, Version: 1, Chart: req.Chart, Config: req.Values,
		Info: &release.Info{Status: release.StatusPendingInstall, LastDeployed: helmtime.Time{Time: time.Now().Add(-defaultActionTimeout - lockGrace - time.Second)}},
	})).To(Succeed())

	out, err := ReconcileRelease(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.Actions).To(Equal([]Action{ActionUnlock, ActionUninstall, ActionInstall}))
	g.Expect(out.Release.Status).To(Equal(string(release.StatusDeployed)))
	g.Expect(out.Observed[0].Status).To(Equal(string(release.StatusFailed)), "the observer saw the unlock")
}

// TestPendingReleaseOfSomeoneElseWaitsOutTheTimeout: a pending-upgrade
// revision this process did not write, younger than the action timeout,
// may be someone's helm upgrade still running: it is left pending, and the
// call says until when; once older, it is unlocked and remediated.
func TestPendingReleaseOfSomeoneElseWaitsOutTheTimeout(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	req := adminRelease(t, "busy", "hookfail", map[string]any{"failHook": false})
	req.Timeout = 2 * time.Minute
	ns := req.Namespace
	out, err := ReconcileRelease(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.Release.Revision).To(Equal(1))

	// Someone else's helm upgrade, started 30s ago, is running.
	cfg, err := req.Configs(ns)
	g.Expect(err).NotTo(HaveOccurred())
	started := time.Now().Add(-30 * time.Second)
	g.Expect(cfg.Releases.Create(&release.Release{
		Name: "busy", Namespace: ns, Version: 2, Chart: req.Chart, Config: req.Values,
		Info: &release.Info{Status: release.StatusPendingUpgrade, LastDeployed: helmtime.Time{Time: started}},
	})).To(Succeed())

	req.Values = map[string]any{"failHook": false, "changed": "yes"}
	out, err = ReconcileRelease(ctx, req)
	var locked *ReleaseLockedError
	g.Expect(errors.As(err, &locked)).To(BeTrue(), "%v", err)
	g.Expect(out.Actions).To(BeEmpty(), "nothing done to a release that may be changing")
	g.Expect(locked.Until).To(BeTemporally("~", started.Add(2*time.Minute+lockGrace), time.Second))
	g.Expect(err.Error()).To(ContainSubstring("helm release " + ns + "/busy revision 2 is pending-upgrade since"))
	last, err := LastRelease(cfg, "busy")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(last.Info.Status).To(Equal(release.StatusPendingUpgrade), "still pending")

	// The same, started longer ago than the timeout: stale, unlocked.
	last.Info.LastDeployed = helmtime.Time{Time: time.Now().Add(-2*time.Minute - lockGrace - time.Second)}
	g.Expect(cfg.Releases.Update(last)).To(Succeed())
	out, err = ReconcileRelease(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.Actions[0]).To(Equal(ActionUnlock))
	g.Expect(out.Release.Status).To(Equal(string(release.StatusDeployed)))
}

func TestImpersonationDenied(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, k8s, "helm-")
	// The ServiceAccount may keep release records but create nothing else.
	g.Expect(k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deployer"}})).To(Succeed())
	g.Expect(k8s.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "releases"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"*"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "delete"}},
		}})).To(Succeed())
	g.Expect(k8s.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "releases"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "releases"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: "deployer"}}})).To(Succeed())

	req := ReleaseRequest{
		Configs: NewConfigFactory(cfg, identity.ServiceAccountUser(ns, "deployer")), ReleaseName: "denied", Namespace: ns,
		Chart: testChart(t, "hookfail"), Values: map[string]any{"failHook": false},
	}
	out, err := ReconcileRelease(ctx, req)
	g.Expect(fault.IsPermanent(err)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("forbidden: serviceaccount " + ns + "/deployer cannot create configmaps in namespace " + ns))
	g.Expect(out.Failure).To(Equal(FailureForbidden))
	g.Expect(out.Actions).To(Equal([]Action{ActionInstall}), "no remediation of a denial")

	// Without even the Secrets, reading the history is what is denied.
	req.Configs = NewConfigFactory(cfg, identity.ServiceAccountUser(ns, "nobody"))
	_, err = ReconcileRelease(ctx, req)
	g.Expect(fault.IsPermanent(err)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("cannot list secrets in namespace " + ns))
}

// failingDriver fails the storage operations switched on.
type failingDriver struct {
	driver.Driver
	query, update atomic.Pointer[error]
}

func (d *failingDriver) Query(l map[string]string) ([]*release.Release, error) {
	if err := d.query.Load(); err != nil {
		return nil, *err
	}
	return d.Driver.Query(l)
}

func (d *failingDriver) Update(key string, rls *release.Release) error {
	if err := d.update.Load(); err != nil {
		return *err
	}
	return d.Driver.Update(key, rls)
}

func TestFailingStorage(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, k8s, "helm-")
	fd := &failingDriver{}
	// One operator's Releases across the calls, as the deploy engine's:
	// the revision its install left pending is its own to unlock.
	releases := NewReleases()
	real := releases.ConfigFactory(cfg, "")
	req := ReleaseRequest{
		Configs: func(ns string) (*action.Configuration, error) {
			cfg, err := real(ns)
			if err == nil {
				// Secrets, not the memory driver: that one keeps the
				// pointer Helm later mutates, hiding a failed update.
				fd.Driver = cfg.Releases.Driver
				cfg.Releases.Driver = fd
			}
			return cfg, err
		},
		ReleaseName: "flaky", Namespace: ns, Chart: testChart(t, "hookfail"), Values: map[string]any{"failHook": false},
	}

	refused := error(errors.New("dial tcp 10.0.0.1:443: connect: connection refused"))
	fd.query.Store(&refused)
	out, err := releases.Reconcile(ctx, req)
	g.Expect(fault.IsUnavailable(err)).To(BeTrue(), "%v", err)
	g.Expect(out.Actions).To(BeEmpty())
	fd.query.Store(nil)

	// Helm only logs a failure to record the deployed status, so the
	// release stays pending-install, as after a crash; unlocking needs an
	// update too, which fails.
	broken := error(errors.New("storage is read-only"))
	fd.update.Store(&broken)
	out, err = releases.Reconcile(ctx, req)
	g.Expect(err).To(MatchError(ContainSubstring("read-only")))
	g.Expect(out.Actions).To(Equal([]Action{ActionInstall, ActionUnlock}))
	g.Expect(out.Release.Status).To(Equal(string(release.StatusPendingInstall)))

	fd.update.Store(nil)
	out, err = releases.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.Actions).To(Equal([]Action{ActionUnlock, ActionUninstall, ActionInstall}))
	g.Expect(out.Release.Status).To(Equal(string(release.StatusDeployed)))
}

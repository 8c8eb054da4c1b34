package helm

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/release"
	helmtime "helm.sh/helm/v3/pkg/time"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Two operators in one process (an envtest suite beside a benchmark) each
// have their own Releases: what one wrote, runs or discovered is not the
// other's.

// A revision one operator wrote and left pending is unlocked at once by
// that operator; the other, which did not write it, waits it out as it
// waits for anyone's helm upgrade.
func TestReleasesCountOnlyTheirOwnRevisionsAsWritten(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	a, b := NewReleases(), NewReleases()
	req := adminRelease(t, "mine", "hookfail", map[string]any{"failHook": false})
	req.Timeout = 2 * time.Minute
	req.Configs = a.ConfigFactory(cfg, "")
	out, err := a.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.Release.Revision).To(Equal(1))

	// a's install of revision 1 ended pending (its process stopped
	// mid-action, say), just now.
	hcfg, err := req.Configs(req.Namespace)
	g.Expect(err).NotTo(HaveOccurred())
	last, err := LastRelease(hcfg, "mine")
	g.Expect(err).NotTo(HaveOccurred())
	last.Info.Status, last.Info.LastDeployed = release.StatusPendingInstall, helmtime.Time{Time: time.Now()}
	g.Expect(hcfg.Releases.Update(last)).To(Succeed())

	req.Values = map[string]any{"failHook": false, "changed": "yes"}
	other := req
	other.Configs = b.ConfigFactory(cfg, "")
	_, err = b.Reconcile(ctx, other)
	var locked *ReleaseLockedError
	g.Expect(errors.As(err, &locked)).To(BeTrue(), "another operator took a's revision as its own: %v", err)

	out, err = a.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred(), "a waited for a revision it wrote itself")
	g.Expect(out.Actions).NotTo(BeEmpty())
	g.Expect(out.Actions[0]).To(Equal(ActionUnlock))
}

// An action one operator has in flight is not the other's, and its end
// wakes the environment through the operator that runs it only.
func TestReleasesKeepTheirOwnActionsInFlight(t *testing.T) {
	a, b := NewReleases(), NewReleases()
	key := ReleaseKey("uid-1", "ns", "web")
	run := &Run{digest: "sha256:1", started: time.Now(), done: make(chan struct{})}
	a.inFlight.mu.Lock()
	a.inFlight.runs[key] = run
	a.inFlight.mu.Unlock()
	if !a.InFlight(key) {
		t.Fatal("a does not see its own action in flight")
	}
	if b.InFlight(key) {
		t.Error("b sees a's action in flight as its own")
	}
	if _, ok := b.PendingDigest(key); ok {
		t.Error("b reads the digest of a's action in flight")
	}

	a.inFlight.notify(client.ObjectKey{Namespace: "ns", Name: "env"})
	select {
	case ev := <-a.Wakes():
		if ev.Object.GetName() != "env" {
			t.Errorf("a woke %q, want env", ev.Object.GetName())
		}
	default:
		t.Error("a's wake did not reach a's channel")
	}
	select {
	case ev := <-b.Wakes():
		t.Errorf("a's wake of %s reached b's channel", ev.Object.GetName())
	default:
	}
}

// One operator's discovery of an identity is not reused by the other, and
// a CRD one applied ages its own discoveries only.
func TestReleasesDiscoverForThemselves(t *testing.T) {
	g := NewWithT(t)
	a, b := NewReleases(), NewReleases()
	da, err := a.discoveryFor(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	again, err := a.discoveryFor(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(BeIdenticalTo(da), "an operator's discovery of an identity is kept")
	db, err := b.discoveryFor(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(db).NotTo(BeIdenticalTo(da), "b reused a's discovery")

	a.CRDApplied()
	g.Expect(da.crdsApplied.Load()).NotTo(Equal(da.crds), "a's discovery is aged by a's CRD")
	g.Expect(db.crdsApplied.Load()).To(Equal(db.crds), "a's CRD aged b's discovery")
}

package helm

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/release"
	helmtime "helm.sh/helm/v3/pkg/time"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestPendingRevisionOfAPreviousLeaderIsUnlockedAtOnce: an operator killed
// during a Helm upgrade leaves the revision pending-upgrade. The next
// leader of the same lease (another process) unlocks and remediates it at
// once instead of waiting out the action timeout and its grace; a
// revision written without a lease, under another lease, or by someone's
// helm upgrade that copied the label (it names an older revision) still
// waits.
func TestPendingRevisionOfAPreviousLeaderIsUnlockedAtOnce(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	req := adminRelease(t, "leader", "hookfail", map[string]any{"failHook": false})
	req.Timeout = 2 * time.Minute
	ns := req.Namespace
	killed := NewWriter("devloop-manager.devloop.dev")
	req.Writer = killed
	out, err := ReconcileRelease(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.Release.Revision).To(Equal(1))
	stored := &corev1.Secret{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: ReleaseSecret("leader", 1)}, stored)).To(Succeed())
	g.Expect(stored.Labels).To(HaveKeyWithValue(WriterLabel, killed+".1"), "the storage Secret names its writer and revision")

	// The killed leader's upgrade, started 5 s ago, left revision 2
	// pending-upgrade (written as its driver writes).
	cfg, err := req.Configs(ns)
	g.Expect(err).NotTo(HaveOccurred())
	last, err := LastRelease(cfg, "leader")
	g.Expect(err).NotTo(HaveOccurred())
	pending := *last
	pending.Version, pending.Labels = 2, map[string]string{DigestLabel: last.Labels[DigestLabel]}
	pending.Info = &release.Info{Status: release.StatusPendingUpgrade, LastDeployed: helmtime.Time{Time: time.Now().Add(-5 * time.Second)}}
	g.Expect(writerDriver{Driver: cfg.Releases.Driver, writer: killed}.Create(ReleaseSecret("leader", 2), &pending)).To(Succeed())

	req.Values = map[string]any{"failHook": false, "changed": "yes"}
	stillLocked := func(writer, why string) {
		t.Helper()
		r := req
		r.Writer = writer
		_, err := ReconcileRelease(ctx, r)
		var locked *ReleaseLockedError
		g.Expect(errors.As(err, &locked)).To(BeTrue(), "%s: %v", why, err)
	}
	stillLocked("", "a process without leader election proves no writer gone")
	stillLocked(NewWriter("another-shard.devloop.dev"), "a leader of another lease")

	// Someone's helm upgrade of revision 3 copies revision 2's labels.
	human := pending
	human.Version, human.Labels = 3, map[string]string{DigestLabel: last.Labels[DigestLabel], WriterLabel: killed + ".2"}
	g.Expect(cfg.Releases.Update(withStatus(&pending, release.StatusSuperseded))).To(Succeed())
	g.Expect(cfg.Releases.Create(&human)).To(Succeed())
	stillLocked(NewWriter("devloop-manager.devloop.dev"), "a label copied from revision 2 onto revision 3")
	g.Expect(cfg.Releases.Delete("leader", 3)).Error().NotTo(HaveOccurred())
	g.Expect(cfg.Releases.Update(withStatus(&pending, release.StatusPendingUpgrade))).To(Succeed())

	// The next leader of the same lease: unlocked and upgraded at once.
	req.Writer = NewWriter("devloop-manager.devloop.dev")
	out, err = ReconcileRelease(ctx, req)
	g.Expect(err).NotTo(HaveOccurred(), "the new leader waited for a revision its lease's previous holder left")
	g.Expect(out.Actions[0]).To(Equal(ActionUnlock))
	g.Expect(out.Release.Status).To(Equal(string(release.StatusDeployed)))
}

func withStatus(rls *release.Release, s release.Status) *release.Release {
	c := *rls
	info := *rls.Info
	info.Status = s
	c.Info = &info
	return &c
}

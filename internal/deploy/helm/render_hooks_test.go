package helm

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// hookedRelease is a pending revision with a pre-install ConfigMap hook,
// a test-only Pod hook and a pre-rollback Job hook.
func hookedRelease(status release.Status) *release.Release {
	return &release.Release{Name: "r", Namespace: "ns", Version: 1, Info: &release.Info{Status: status}, Hooks: []*release.Hook{
		{Path: "a.yaml", Events: []release.HookEvent{release.HookPreInstall}, Manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"},
		{Path: "t.yaml", Events: []release.HookEvent{release.HookTest}, Manifest: "apiVersion: v1\nkind: Pod\nmetadata: {name: t}\n"},
		{Path: "j.yaml", Events: []release.HookEvent{release.HookPreRollback}, Manifest: "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\n"},
	}}
}

// TestHookCheckSeesTheHooksActionsRun: the hook check is told every hook
// an install, upgrade or rollback may run, as edited, before the revision
// is stored; not the test-only ones (devloop never runs helm test); and
// its refusal stores nothing.
func TestHookCheckSeesTheHooksActionsRun(t *testing.T) {
	for _, status := range []release.Status{release.StatusPendingInstall, release.StatusPendingUpgrade, release.StatusPendingRollback} {
		t.Run(string(status), func(t *testing.T) {
			g := NewWithT(t)
			var seen []string
			refuse := false
			render := &releaseRender{patches: noPatches{}, mutate: func(objs []*unstructured.Unstructured) error {
				for _, o := range objs {
					o.SetLabels(map[string]string{"edited": "yes"})
				}
				return nil
			}, check: func(_ context.Context, hooks []*unstructured.Unstructured) error {
				for _, h := range hooks {
					seen = append(seen, h.GetName()+"/"+h.GetLabels()["edited"])
				}
				if refuse {
					return errors.New("refused")
				}
				return nil
			}}
			stored := &recordingDriver{Memory: driver.NewMemory()}
			d := hookRenderDriver{Driver: stored, render: render, ctx: context.Background()}
			g.Expect(d.Create("k", hookedRelease(status))).To(Succeed())
			want := []string{"a/yes", "j/yes"}
			if status == release.StatusPendingRollback {
				// A rollback's revision is a stored copy: checked as
				// stored, not edited again.
				want = []string{"a/", "j/"}
			}
			g.Expect(seen).To(Equal(want))
			g.Expect(stored.created).To(Equal(1))

			refuse = true
			g.Expect(d.Create("k", hookedRelease(status))).To(MatchError("refused"))
			g.Expect(stored.created).To(Equal(1), "a refused revision is not stored")
		})
	}
}

// recordingDriver counts the revisions stored through it.
type recordingDriver struct {
	*driver.Memory
	created int
}

func (d *recordingDriver) Create(string, *release.Release) error { d.created++; return nil }

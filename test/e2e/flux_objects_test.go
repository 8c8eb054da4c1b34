//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/test/e2e/poll"
)

// Flux objects are read as unstructured: the fluxcd API modules that
// build with this Go need older Kubernetes libraries than devloop's.
var (
	ociRepositoryGVK = schema.GroupVersionKind{Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: "OCIRepository"}
	kustomizationGVK = schema.GroupVersionKind{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Kind: "Kustomization"}
	batchJobListGVK  = schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "JobList"}
)

// fluxRequestedAt is Flux's annotation asking for a reconcile now (what
// `flux reconcile` sets); status.lastHandledReconcileAt echoes it.
const fluxRequestedAt = "reconcile.fluxcd.io/requestedAt"

func fluxObject(gvk schema.GroupVersionKind, ns, name string) *unstructured.Unstructured {
	return unstructuredObject(gvk, ns, name)
}

// kustomizationStatus is what the tests read of a Kustomization.
type kustomizationStatus struct {
	Generation             int64              `json:"-"`
	ObservedGeneration     int64              `json:"observedGeneration"`
	LastAppliedRevision    string             `json:"lastAppliedRevision"`
	LastAttemptedRevision  string             `json:"lastAttemptedRevision"`
	LastHandledReconcileAt string             `json:"lastHandledReconcileAt"`
	Conditions             []metav1.Condition `json:"conditions"`
}

func getKustomization(ctx context.Context, ns, name string) (*kustomizationStatus, error) {
	u := fluxObject(kustomizationGVK, ns, name)
	if err := dc.Client.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
		return nil, err
	}
	st := &kustomizationStatus{}
	if m, ok := u.Object["status"].(map[string]any); ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, st); err != nil {
			return nil, err
		}
	}
	st.Generation = u.GetGeneration()
	return st, nil
}

func (k *kustomizationStatus) ready() *metav1.Condition {
	for i := range k.Conditions {
		if k.Conditions[i].Type == "Ready" {
			return &k.Conditions[i]
		}
	}
	return nil
}

// readyFor says whether the Kustomization is Ready with the artifact of
// digest applied and health-checked.
func (k *kustomizationStatus) readyFor(digest string) bool {
	r := k.ready()
	return r != nil && r.Status == metav1.ConditionTrue && k.ObservedGeneration == k.Generation &&
		strings.HasSuffix(k.LastAppliedRevision, digest)
}

// stalledFor says whether the Kustomization gave up on the artifact of
// digest (Ready=False for it): a failed apply or health check.
func (k *kustomizationStatus) stalledFor(digest string) bool {
	r := k.ready()
	return r != nil && r.Status == metav1.ConditionFalse && strings.HasSuffix(k.LastAttemptedRevision, digest) &&
		r.Reason != "DependencyNotReady" && r.Reason != "ArtifactFailed"
}

func (k *kustomizationStatus) summary() string {
	r := k.ready()
	if r == nil {
		return "Ready=? (no status yet)"
	}
	rev := k.LastAppliedRevision
	if i := strings.LastIndexByte(rev, ':'); i >= 0 && len(rev) > i+12 {
		rev = rev[:i+13]
	}
	return fmt.Sprintf("Ready=%s (%s) applied %s: %s", r.Status, r.Reason, rev, r.Message)
}

// requestFluxReconcile sets reconcile.fluxcd.io/requestedAt on a Flux
// object and waits until its controller handled it (and, for a
// Kustomization, finished: Ready again after the apply and health checks).
func requestFluxReconcile(t *testing.T, gvk schema.GroupVersionKind, ns, name string) string {
	t.Helper()
	c := need(t)
	ctx := context.Background()
	value := time.Now().Format(time.RFC3339Nano)
	g := NewWithT(t)
	u := fluxObject(gvk, ns, name)
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, fluxRequestedAt, value))
	g.Expect(c.Client.Patch(ctx, u, client.RawPatch("application/merge-patch+json", patch))).To(Succeed())
	waitCheck(t, poll.Wait{What: fmt.Sprintf("%s %s/%s handles the reconcile request", gvk.Kind, ns, name), Every: 250 * time.Millisecond, Within: 3 * time.Minute},
		func(g Gomega) {
			cur := fluxObject(gvk, ns, name)
			g.Expect(c.Client.Get(ctx, client.ObjectKeyFromObject(cur), cur)).To(Succeed())
			handled, _, _ := unstructured.NestedString(cur.Object, "status", "lastHandledReconcileAt")
			g.Expect(handled).To(Equal(value))
			conds, _, _ := unstructured.NestedSlice(cur.Object, "status", "conditions")
			ready := ""
			for _, cond := range conds {
				if m, ok := cond.(map[string]any); ok && m["type"] == "Ready" {
					ready, _ = m["status"].(string)
				}
			}
			g.Expect(ready).To(Equal("True"))
		})
	return value
}

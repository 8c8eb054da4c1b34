package controllers

import (
	"context"
	"errors"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/internal/testenv"
)

// heldStatusWrites is a client whose status patches wait until the test
// lets each through (or fails it), so a test can look at what the
// reconciler does while one is on its way.
type heldStatusWrites struct {
	client.Client
	started chan struct{}
	release chan error
}

func newHeldStatusWrites(t *testing.T, env *v1alpha1.DevEnvironment) *heldStatusWrites {
	t.Helper()
	scheme := runtime.NewScheme()
	NewWithT(t).Expect(v1alpha1.AddToScheme(scheme)).To(Succeed())
	h := &heldStatusWrites{started: make(chan struct{}, 4), release: make(chan error, 4)}
	h.Client = fake.NewClientBuilder().WithScheme(scheme).WithObjects(env).WithStatusSubresource(env).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			h.started <- struct{}{}
			if err := <-h.release; err != nil {
				return err
			}
			return c.SubResource(sub).Patch(ctx, obj, p, opts...)
		}}).Build()
	return h
}

// readyEnv is an environment stored as Ready for its generation.
func readyEnv() *v1alpha1.DevEnvironment {
	env := &v1alpha1.DevEnvironment{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "n", Generation: 2}}
	summarize(env, nil)
	return env
}

func stored(g Gomega, c client.Client) *v1alpha1.DevEnvironment {
	env := &v1alpha1.DevEnvironment{}
	g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: "n", Name: "e"}, env)).To(Succeed())
	return env
}

// TestProgressIsWrittenBesideTheAction: the progress write before a build
// does not hold the build up — progress returns while the write is still
// on its way — and the final status write lands after it, computed against
// what it stored, so the environment ends Ready with no Reconciling left.
func TestProgressIsWrittenBesideTheAction(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	h := newHeldStatusWrites(t, readyEnv())
	r := &DevEnvironmentReconciler{Client: h}
	env := stored(g, h)
	s := &scope{env: env, before: env.DeepCopy(), read: env.DeepCopy()}

	returned := make(chan struct{})
	go func() {
		r.progress(ctx, s, "component api: building image api")
		close(returned)
	}()
	g.Eventually(h.started).Should(Receive(), "the progress write was sent")
	g.Eventually(returned).Should(BeClosed(), "progress returned while its write is held: the build goes on beside it")
	g.Expect(meta.IsStatusConditionTrue(stored(g, h).Status.Conditions, v1alpha1.ConditionReady)).To(BeTrue(), "the write is still held")

	// The reconcile ends: the final write waits for the progress write,
	// then undoes what it said.
	h.release <- nil
	s.settleProgress(ctx)
	onTheServer := stored(g, h)
	g.Expect(meta.IsStatusConditionTrue(onTheServer.Status.Conditions, v1alpha1.ConditionReconciling)).To(BeTrue(), "the progress write landed")
	g.Expect(s.before.ResourceVersion).To(Equal(onTheServer.ResourceVersion))
	g.Expect(s.env.ResourceVersion).To(Equal(onTheServer.ResourceVersion))

	summarize(s.env, nil)
	h.release <- nil
	g.Expect(r.writeStatus(ctx, s.env, s.before)).To(Succeed())
	final := stored(g, h)
	g.Expect(meta.IsStatusConditionTrue(final.Status.Conditions, v1alpha1.ConditionReady)).To(BeTrue())
	g.Expect(meta.FindStatusCondition(final.Status.Conditions, v1alpha1.ConditionReconciling)).To(BeNil(), "the final write removed what progress said")
	res, err := testenv.Kstatus(final)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Status).To(Equal(status.CurrentStatus), res.Message)
}

// TestAFailedProgressWriteIsWrittenByTheFinalOne: when the progress write
// fails, the final write is computed against what is stored, not against
// what the failed write would have stored — a final status that says the
// same as the progress did is still written.
func TestAFailedProgressWriteIsWrittenByTheFinalOne(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	h := newHeldStatusWrites(t, readyEnv())
	r := &DevEnvironmentReconciler{Client: h}
	env := stored(g, h)
	s := &scope{env: env, before: env.DeepCopy(), read: env.DeepCopy()}

	r.progress(ctx, s, "component api: building image api")
	g.Eventually(h.started).Should(Receive())
	h.release <- errors.New("the API server is away")
	s.settleProgress(ctx)
	g.Expect(meta.IsStatusConditionTrue(s.before.Status.Conditions, v1alpha1.ConditionReady)).To(BeTrue(), "the base is what is stored again")

	// The reconcile ends still building: the same words as the progress.
	summarize(s.env, &fault.WaitingError{Reason: v1alpha1.ReasonProgressing, Err: errors.New("component api: building image api")})
	h.release <- nil
	g.Expect(r.writeStatus(ctx, s.env, s.before)).To(Succeed())
	final := stored(g, h)
	g.Expect(meta.IsStatusConditionTrue(final.Status.Conditions, v1alpha1.ConditionReconciling)).To(BeTrue(), "written by the final patch")
	g.Expect(meta.IsStatusConditionTrue(final.Status.Conditions, v1alpha1.ConditionReady)).To(BeFalse())
}

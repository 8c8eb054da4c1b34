package controllers_test

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/controllers"
	"github.com/devloop-dev/devloop/internal/engine"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// blockingDeployer never finishes a component on its own: it returns when
// its context ends, or after a minute.
type blockingDeployer struct {
	engine.Engine
	deadline chan time.Time
}

func (d *blockingDeployer) Reconcile(ctx context.Context, _ engine.Request) (engine.Result, error) {
	dl, _ := ctx.Deadline()
	select {
	case d.deadline <- dl:
	default:
	}
	select {
	case <-ctx.Done():
		return engine.Result{}, ctx.Err()
	case <-time.After(time.Minute):
		return engine.Result{}, errors.New("blocked for a minute")
	}
}

// TestReconcileDeadline: a component that would hold the worker
// indefinitely is cut short at the reconcile deadline; the reconcile
// returns an error (retried with backoff, not Stalled) and status names
// the limit.
func TestReconcileDeadline(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := operatortest.Namespace(t)
	env := operatortest.Env(ns, "slow").Source(operatortest.SharedOCISource()).Components(operatortest.ScriptedComponent("a")).Obj()
	env.Spec.Suspend = true // the suite's manager leaves it alone
	g.Expect(operatortest.Admin.Create(ctx, env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)
	operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Finalizers).To(ContainElement(v1alpha1.Finalizer))
	})

	s := operatortest.Reconciler
	blocking := &blockingDeployer{Engine: s.Engines.Deploy, deadline: make(chan time.Time, 1)}
	engines := s.Engines
	engines.Deploy = blocking
	// The suite's reconciler (controllers.New) under a 2 s deadline.
	r := new(controllers.DevEnvironmentReconciler)
	*r = *s
	r.Client, r.Engines, r.ReconcileTimeout = &requestingClient{Client: s.Client}, engines, 2*time.Second
	started := time.Now()
	_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
	g.Expect(err).To(MatchError(ContainSubstring("reconcile stopped at the operator's limit of 2s (--reconcile-timeout)")))
	g.Expect(<-blocking.deadline).To(BeTemporally("~", started.Add(2*time.Second), time.Second), "the component ran under the deadline")

	got := &v1alpha1.DevEnvironment{}
	g.Expect(operatortest.Admin.Get(ctx, key, got)).To(Succeed())
	ready := operatortest.EnvCondition(got, v1alpha1.ConditionReady)
	g.Expect(ready).NotTo(BeNil())
	g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(ready.Message).To(ContainSubstring("--reconcile-timeout"))
	g.Expect(operatortest.EnvCondition(got, v1alpha1.ConditionStalled)).To(BeNil(), "retried, not Stalled")
}

package steadystate

import (
	"context"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/devloop-dev/devloop/controllers"
	"github.com/devloop-dev/devloop/internal/metrics"
	"github.com/devloop-dev/devloop/internal/operator"
	"github.com/devloop-dev/devloop/internal/plan"
	"github.com/devloop-dev/devloop/internal/testenv"
)

// concurrentReconciles is cmd/manager's default --concurrent.
const concurrentReconciles = 4

// startOperator runs the operator in this process as cmd/manager wires it
// (default intervals, the chart's RBAC, every request counted by
// internal/metrics) and returns its reconciler, so the benchmark can also
// call Reconcile itself, and the counts of its requests. It stops when
// the benchmark ends.
func startOperator(b *testing.B) (*controllers.DevEnvironmentReconciler, *metrics.Requests) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cfg, err := testenv.OperatorConfig(ctx, testEnv, k8s)
	if err != nil {
		b.Fatal(err)
	}
	requests := metrics.CountRequests(cfg)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 testenv.Scheme(),
		Cache:                  operator.CacheOptions(operator.WatchScope{}),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		b.Fatal(err)
	}
	workDir := b.TempDir()
	op := operator.New(mgr, operator.Options{HelperImage: "registry.test/devloop/manager:bench", WorkDir: workDir})
	// The manager's reconciler, ownwrites client included.
	r := controllers.New(mgr, controllers.Wiring{
		Policy:   plan.Policy{NoCrossNamespaceRefs: true},
		Identity: op.Identity,
		Sources:  op.Sources,
		Engines:  op.Engines,
	})
	if err := r.SetupWithManager(mgr, concurrentReconciles); err != nil {
		b.Fatal(err)
	}
	if err := mgr.Add(metrics.WorkDirSampler{Root: workDir}); err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	b.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				b.Log("manager:", err)
			}
		case <-time.After(30 * time.Second):
			b.Log("manager did not stop within 30s")
		}
	})
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		b.Fatal("cache did not sync")
	}
	return r, requests
}

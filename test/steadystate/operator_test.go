package steadystate

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/devloop-dev/devloop/controllers"
	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/internal/deploy"
	"github.com/devloop-dev/devloop/internal/egress"
	"github.com/devloop-dev/devloop/internal/identity"
	"github.com/devloop-dev/devloop/internal/metrics"
	"github.com/devloop-dev/devloop/internal/source"
	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/internal/testrun"
)

// concurrentReconciles is cmd/manager's default --concurrent.
const concurrentReconciles = 4

// startOperator runs the operator in this process as cmd/manager wires it
// (default intervals, the chart's RBAC, every request counted by
// internal/metrics) and returns its reconciler, so the benchmark can also
// call Reconcile itself. It stops when the benchmark ends.
func startOperator(b *testing.B) *controllers.DevEnvironmentReconciler {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cfg, err := testenv.OperatorConfig(ctx, testEnv, k8s)
	if err != nil {
		b.Fatal(err)
	}
	metrics.CountRequests(cfg)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 testenv.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		b.Fatal(err)
	}
	workDir := b.TempDir()
	tenants := &identity.Identity{Config: mgr.GetConfig(), Mapper: mgr.GetRESTMapper(), Scheme: mgr.GetScheme()}
	recorder := mgr.GetEventRecorder("devloop")
	r := &controllers.DevEnvironmentReconciler{
		Client:               mgr.GetClient(),
		APIReader:            mgr.GetAPIReader(),
		Recorder:             recorder,
		NoCrossNamespaceRefs: true,
		Identity:             tenants,
		Sources: &source.Fetcher{Reader: mgr.GetAPIReader(), Root: filepath.Join(workDir, "sources"),
			Egress: egress.Default()},
		Builds: &build.Engine{
			Options:   build.Options{HelperImage: "registry.test/devloop/manager:bench", BaseCacheDir: filepath.Join(workDir, "base-layers")},
			Cache:     mgr.GetClient(),
			APIReader: mgr.GetAPIReader(),
			Events:    recorder,
		},
		Deploy: &deploy.Engine{
			Mapper:           mgr.GetRESTMapper(),
			Charts:           &deploy.ChartLoader{CacheDir: filepath.Join(workDir, "charts"), Egress: egress.Default()},
			DriftQuietPeriod: deploy.DefaultDriftQuietPeriod,
		},
		Tests: &testrun.Engine{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Events: recorder,
			HelperImage: "registry.test/devloop/manager:bench"},
	}
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
	return r
}

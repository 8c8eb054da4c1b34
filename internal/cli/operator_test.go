package cli

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/devloop-dev/devloop/controllers"
	"github.com/devloop-dev/devloop/internal/deploy"
	"github.com/devloop-dev/devloop/internal/source"
	"github.com/devloop-dev/devloop/internal/testenv"
)

// The push tests run the real operator in-process, wired as cmd/manager
// wires it (source fetcher, in-process image builds, the deploy engine
// impersonating the environment's ServiceAccount), watching one namespace
// only, so the other tests can play the operator's part by hand in theirs.
var operator struct {
	once    sync.Once
	ns      string
	err     error
	cancel  context.CancelFunc
	done    chan struct{}
	workDir string
}

// operatorNamespace starts the operator once and returns the namespace it
// reconciles, with the ServiceAccount "deployer" in it.
func operatorNamespace(t *testing.T) string {
	t.Helper()
	operator.once.Do(func() { operator.err = startOperator() })
	if operator.err != nil {
		t.Fatalf("starting the operator: %v", operator.err)
	}
	return operator.ns
}

func startOperator() error {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "operated-"}}
	if err := k8s.Create(ctx, ns); err != nil {
		return err
	}
	if err := testenv.CreateDeployer(ctx, k8s, ns.Name, "deployer"); err != nil {
		return err
	}
	workDir, err := os.MkdirTemp("", "devloop-cli-operator-")
	if err != nil {
		return err
	}
	ctrl.SetLogger(logr.Discard())
	mgr, err := ctrl.NewManager(testEnv.Config, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{ns.Name: {}}},
	})
	if err != nil {
		return err
	}
	r := &controllers.DevEnvironmentReconciler{
		Client:       mgr.GetClient(),
		Recorder:     mgr.GetEventRecorder("devloop"),
		WaitInterval: 200 * time.Millisecond,
		Sources:      &source.Fetcher{Reader: mgr.GetAPIReader(), Root: filepath.Join(workDir, "sources")},
		Images:       controllers.ImageOptions{HelperImage: "registry.test/devloop/manager:test", BaseCacheDir: filepath.Join(workDir, "base")},
		Engine: &controllers.DeployEngine{
			Config: mgr.GetConfig(),
			Mapper: mgr.GetRESTMapper(),
			Scheme: mgr.GetScheme(),
			Charts: &deploy.ChartLoader{CacheDir: filepath.Join(workDir, "charts")},
		},
	}
	if err := r.SetupWithManager(mgr, 2); err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = mgr.Start(runCtx)
	}()
	operator.ns, operator.cancel, operator.done, operator.workDir = ns.Name, cancel, done, workDir
	return nil
}

// stopOperator stops the operator if a test started it.
func stopOperator() {
	if operator.cancel == nil {
		return
	}
	operator.cancel()
	<-operator.done
	os.RemoveAll(operator.workDir)
}

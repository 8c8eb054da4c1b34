// Package operatortest runs the operator against envtest for the tests of
// any package: Main starts one API server, the operator under the chart's
// RBAC (wired by internal/operator.New, as cmd/manager wires it), a real
// registry, and the seams a cluster without kubelets lacks, scripted.
// The helpers and the spec builder (Env) are what those tests share.
//
// It imports controllers and internal/operator, so under internal/ only
// test files may import it.
package operatortest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/devloop-dev/devloop/controllers"
	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/internal/identity"
	"github.com/devloop-dev/devloop/internal/operator"
	"github.com/devloop-dev/devloop/internal/plan"
	"github.com/devloop-dev/devloop/internal/teamcache"
	"github.com/devloop-dev/devloop/internal/testenv"
)

// What Main starts, for the tests to use.
var (
	// Admin is the test's connection, as the cluster admin.
	Admin client.Client
	// AdminConfig is Admin's connection; OperatorConfig the operator's,
	// with the chart's RBAC.
	AdminConfig, OperatorConfig *rest.Config
	// Reconciler is the running reconciler.
	Reconciler *controllers.DevEnvironmentReconciler
	// Registry is where sources and images are pushed.
	Registry *RecordingRegistry
	// ScriptedDeploy is the deploy engine outside the namespaces given to
	// UseDeployEngine.
	ScriptedDeploy = newScriptedEngine()
	// PodLogs stands in for the kubelet's container logs.
	PodLogs = &FakeLogs{}
	// WarmExec stands in for exec into warm builders.
	WarmExec = &FakeExec{}
	// LiveSyncs stands in for `/.devloop/supervisor sync` in pods.
	LiveSyncs = &ScriptedSync{fail: map[string]string{}}
)

// TeamCacheURL is the build cache service builder pods are told of.
const TeamCacheURL = "https://devloop-build-cache.devloop-system.svc:5003"

// HelperImage is what builder pods would run; no pod runs in envtest.
const HelperImage = "registry.test/devloop/manager:test"

// Timeout bounds every wait of the helpers: how long a test may wait for
// what must eventually hold, never how long it should take. 20 s ran out
// with a CPU hog per core beside make test (load 24): a Helm attempt a
// reconcile request allowed had not finished. A passing wait returns as
// soon as its check holds, so the bound costs only failing tests.
const Timeout = time.Minute

// Main is a package's TestMain: it runs the package's tests against one
// envtest and one operator, or, when go test runs the whole package,
// across shards (see shards.go), and exits. before runs once the operator
// runs, before the tests: a package's own tests take their connection
// there.
func Main(m *testing.M, before ...func() error) {
	if code, ok := runShards(); ok {
		os.Exit(code)
	}
	os.Exit(run(m, before))
}

func run(m *testing.M, before []func() error) int {
	// ERROR lines go to the log of the test they are about, and are kept
	// by namespace (test_log.go). Set before envtest starts, which logs
	// through it too.
	ctrl.SetLogger(logr.New(newTestSink(verboseSink(), os.Stderr, testLog)))
	env, err := testenv.Start()
	if err != nil {
		return fail(err)
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping envtest:", err)
		}
	}()
	// The tests act as the cluster admin; the operator acts as its
	// ServiceAccount with exactly the chart's ClusterRole, as installed.
	admin, err := client.New(env.Config, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		return fail(err)
	}
	OperatorConfig, err = testenv.OperatorConfig(context.Background(), env, admin)
	if err != nil {
		return fail(err)
	}
	mgr, err := ctrl.NewManager(OperatorConfig, ctrl.Options{
		Scheme: testenv.Scheme(),
		// The operator's own cache scope: every test runs with only
		// devloop's Jobs cached and no other kind readable from the cache.
		Cache:                  operator.CacheOptions(operator.WatchScope{}),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return fail(err)
	}
	Registry = newRecordingRegistry()
	defer Registry.Close()
	if _, err := Registry.Push(SharedSourceRepository, "latest", map[string]string{"README": "source of the DAG tests"}); err != nil {
		return fail(err)
	}
	workDir, err := os.MkdirTemp("", "devloop-operatortest-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(workDir)
	// Live-updatable images get a static supervisor; a test binary is
	// not one.
	supervisor, err := staticSupervisor(workDir)
	if err != nil {
		return fail(err)
	}
	AdminConfig = env.Config
	strict := &identity.Identity{Config: OperatorConfig, Mapper: mgr.GetRESTMapper(), Scheme: mgr.GetScheme()}
	// Environments that name no ServiceAccount act as their namespace's
	// default deployer (Namespace makes it), as with the operator's
	// --default-service-account.
	defaulted := &identity.Identity{Config: OperatorConfig, Mapper: mgr.GetRESTMapper(), Scheme: mgr.GetScheme(),
		DefaultServiceAccount: DefaultDeployer}
	// The engines as the operator wires them, with the seams envtest
	// lacks scripted: no kubelet serves logs or runs warm builders, and no
	// pod runs a supervisor.
	operatorSet, err := kubernetes.NewForConfig(OperatorConfig)
	if err != nil {
		return fail(err)
	}
	op := operator.New(mgr, operator.Options{
		HelperImage: HelperImage,
		WorkDir:     workDir,
		// Builder pods get the team build cache, as the chart installs
		// it; nothing serves it (no pod runs in envtest).
		TeamCache: &build.TeamCacheOptions{URL: TeamCacheURL, Reviewer: teamcache.NewKubeReviewer(operatorSet)},
		Test: operator.TestSeams{
			Logs: PodLogs, BuildExec: WarmExec, LiveExec: LiveSyncs, Supervisor: supervisor,
			// Every reconcile checks that unchanged images are still
			// pushed; a test pod that cannot pull its image ends its run
			// quickly.
			VerifyInterval: time.Nanosecond, TestStartTimeout: time.Second,
			// Hand edits are looked for right after an upgrade.
			NoDriftQuietPeriod: true,
		},
	})
	routed := &routedEngine{scripted: ScriptedDeploy, real: op.Engines.Deploy, strict: strict, defaulted: defaulted}
	op.Engines.Deploy = routed
	deployRoutes = routed
	r := controllers.New(mgr, controllers.Wiring{
		Identity:     routed,
		Sources:      op.Sources,
		Engines:      op.Engines,
		Policy:       plan.Policy{NoCrossNamespaceRefs: true},
		WaitInterval: 200 * time.Millisecond,
	})
	if err := r.SetupWithManager(mgr, 4); err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	Admin = admin
	Reconciler = r
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		cancel()
		return fail(fmt.Errorf("cache did not sync"))
	}

	for _, f := range before {
		if err := f(); err != nil {
			cancel()
			return fail(err)
		}
	}
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
	}
	return code
}

func fail(err error) int {
	fmt.Fprintln(os.Stderr, err)
	return 1
}

// verboseSink writes every line to stderr when DEVLOOP_TEST_VERBOSE is
// set; it is nil otherwise.
func verboseSink() logr.LogSink {
	if os.Getenv("DEVLOOP_TEST_VERBOSE") == "" {
		return nil
	}
	return zap.New(zap.UseDevMode(true), zap.WriteTo(os.Stderr), zap.Level(zapcore.DebugLevel)).GetSink()
}

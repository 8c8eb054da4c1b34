package controllers

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/engine"
	"github.com/devloop-dev/devloop/internal/identity"
	"github.com/devloop-dev/devloop/internal/operator"
	"github.com/devloop-dev/devloop/internal/plan"
	"github.com/devloop-dev/devloop/internal/testenv"
)

// k8s talks to the envtest API server; scripted is the deploy engine the
// running reconciler uses outside the deploy tests' namespaces, scripted
// per test; reg is the registry sources
// and images go to; logs stands in for the kubelet's container logs.
var (
	k8s      client.Client
	scripted = newScriptedEngine()
	reg      *testRegistry
	logs     = &fakeLogs{}

	// restConfig is the test admin's connection; operatorConfig is the
	// operator's, with the chart's RBAC.
	restConfig, operatorConfig *rest.Config
	suiteReconciler            *DevEnvironmentReconciler
)

// helperImage is what builder pods would run; no pod runs in envtest.
const helperImage = "registry.test/devloop/manager:test"

func TestMain(m *testing.M) {
	if code, ok := runShards(); ok {
		os.Exit(code)
	}
	env, err := testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.WriteTo(os.Stderr), zap.Level(zapLevel())))
	// The tests act as the cluster admin; the operator acts as its
	// ServiceAccount with exactly the chart's ClusterRole, as installed.
	admin, err := client.New(env.Config, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	operatorConfig, err = testenv.OperatorConfig(context.Background(), env, admin)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	mgr, err := ctrl.NewManager(operatorConfig, ctrl.Options{
		Scheme: testenv.Scheme(),
		// The operator's own cache scope: every test below runs with only
		// devloop's Jobs cached and no other kind readable from the cache.
		Cache:                  operator.CacheOptions(operator.WatchScope{}),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	reg = newTestRegistry()
	if _, err := reg.push("team/src", "latest", map[string]string{"README": "source of the DAG tests"}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	workDir, err := os.MkdirTemp("", "devloop-controllers-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Live-updatable images get a static supervisor; this test binary
	// is not one.
	supervisor, err := staticSupervisor(workDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	restConfig = env.Config
	strict := &identity.Identity{Config: operatorConfig, Mapper: mgr.GetRESTMapper(), Scheme: mgr.GetScheme()}
	// The DAG and build tests' environments, which name no ServiceAccount,
	// act as each namespace's default deployer (newNamespace makes it), as
	// with the operator's --default-service-account.
	defaulted := &identity.Identity{Config: operatorConfig, Mapper: mgr.GetRESTMapper(), Scheme: mgr.GetScheme(),
		DefaultServiceAccount: defaultDeployer}
	// The engines as the operator wires them (internal/operator), with
	// the seams envtest lacks scripted: no kubelet serves logs or runs
	// warm builders, and no pod runs a supervisor.
	op := operator.New(mgr, operator.Options{
		HelperImage: helperImage,
		WorkDir:     workDir,
		Test: operator.TestSeams{
			Logs: logs, BuildExec: suiteExec, LiveExec: liveSyncs, Supervisor: supervisor,
			// Every reconcile checks that unchanged images are still
			// pushed; a test pod that cannot pull its image ends its run
			// quickly.
			VerifyInterval: time.Nanosecond, TestStartTimeout: time.Second,
			// Hand edits are looked for right after an upgrade.
			NoDriftQuietPeriod: true,
		},
	})
	routed := &routedEngine{scripted: scripted, real: op.Engines.Deploy, strict: strict, defaulted: defaulted}
	op.Engines.Deploy = routed
	r := &DevEnvironmentReconciler{
		Client:       mgr.GetClient(),
		Recorder:     mgr.GetEventRecorder("devloop"),
		Identity:     routed,
		Sources:      op.Sources,
		Engines:      op.Engines,
		Policy:       plan.Policy{NoCrossNamespaceRefs: true},
		WaitInterval: 200 * time.Millisecond,
	}
	if err := r.SetupWithManager(mgr, 4); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	k8s = admin
	suiteReconciler = r
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		fmt.Fprintln(os.Stderr, "cache did not sync")
		os.Exit(1)
	}

	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
	}
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping envtest:", err)
	}
	reg.Close()
	os.RemoveAll(workDir)
	os.Exit(code)
}

// zapLevel is quiet unless DEVLOOP_TEST_VERBOSE is set.
func zapLevel() zapcore.Level {
	if os.Getenv("DEVLOOP_TEST_VERBOSE") != "" {
		return -1
	}
	return 2
}

// defaultDeployer is the ServiceAccount every test namespace has, acted as
// by environments that name none outside the real deploy engine's
// namespaces.
const defaultDeployer = "devloop-default"

// newNamespace gives each test a namespace of its own, with its default
// deployer.
func newNamespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "devenv-"}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	if err := testenv.CreateDeployer(context.Background(), k8s, ns.Name, defaultDeployer); err != nil {
		t.Fatal(err)
	}
	// Environments a test leaves behind would keep polling (nothing rolls
	// out in envtest) and hold the workers the next tests need.
	t.Cleanup(func() {
		_ = k8s.DeleteAllOf(context.Background(), &v1alpha1.DevEnvironment{}, client.InNamespace(ns.Name))
	})
	return ns.Name
}

// routedEngine runs the real deploy engine in the namespaces of tests that
// asked for it (useDeployEngine) and the scripted one everywhere else, so
// the DAG tests keep their scripted phases and the deploy tests share the
// one manager.
type routedEngine struct {
	scripted *scriptedEngine
	real     engine.Engine
	deployNS sync.Map // namespace -> true
	// strict refuses environments without a ServiceAccount; defaulted
	// gives them the namespace's default deployer.
	strict, defaulted *identity.Identity
}

// useDeployEngine makes environments in ns deploy for real.
func useDeployEngine(ns string) { suiteEngine().deployNS.Store(ns, true) }

func suiteEngine() *routedEngine { return suiteReconciler.Engines.Deploy.(*routedEngine) }

func (e *routedEngine) pick(ns string) engine.Engine {
	if _, ok := e.deployNS.Load(ns); ok {
		return e.real
	}
	return e.scripted
}

func (e *routedEngine) Reconcile(ctx context.Context, req engine.Request) (engine.Result, error) {
	return e.pick(req.Env.Namespace).Reconcile(ctx, req)
}

func (e *routedEngine) Finalize(ctx context.Context, req engine.Request) error {
	return e.pick(req.Env.Namespace).Finalize(ctx, req)
}

// For acts as the environment's ServiceAccount where the real engine runs
// or the environment names one; the DAG and build tests' environments,
// which name none, act as their namespace's default deployer.
func (e *routedEngine) For(env *v1alpha1.DevEnvironment) *identity.Tenant {
	if _, ok := e.deployNS.Load(env.Namespace); ok || env.Spec.ServiceAccountName != "" {
		return e.strict.For(env)
	}
	return e.defaulted.For(env)
}

// scriptedEngine stands in for the deploy engine: each component reports
// the phase a test sets (Ready by default) or an error, and every call is
// recorded.
type scriptedEngine struct {
	mu         sync.Mutex
	phases     map[string]v1alpha1.ComponentPhase // namespace/component -> phase
	errs       map[string]error
	reconciled map[string]int
	finalized  map[string][]string // namespace -> components, in call order
}

func newScriptedEngine() *scriptedEngine {
	return &scriptedEngine{
		phases:     map[string]v1alpha1.ComponentPhase{},
		errs:       map[string]error{},
		reconciled: map[string]int{},
		finalized:  map[string][]string{},
	}
}

func (e *scriptedEngine) set(ns, component string, phase v1alpha1.ComponentPhase, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.phases[ns+"/"+component] = phase
	e.errs[ns+"/"+component] = err
}

func (e *scriptedEngine) calls(ns, component string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.reconciled[ns+"/"+component]
}

func (e *scriptedEngine) finalizedIn(ns string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.finalized[ns]...)
}

func (e *scriptedEngine) Reconcile(_ context.Context, req engine.Request) (engine.Result, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	key := req.Env.Namespace + "/" + req.Component.Name
	e.reconciled[key]++
	if err := e.errs[key]; err != nil {
		return engine.Result{}, err
	}
	phase, ok := e.phases[key]
	if !ok {
		phase = v1alpha1.PhaseReady
	}
	// Like the deploy engine, a component not Ready yet is polled.
	return engine.Result{Phase: phase, Message: "scripted " + string(phase), Poll: phase != v1alpha1.PhaseReady && phase != v1alpha1.PhaseFailed}, nil
}

func (e *scriptedEngine) Finalize(_ context.Context, req engine.Request) error {
	if req.Component == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.finalized[req.Env.Namespace] = append(e.finalized[req.Env.Namespace], req.Component.Name)
	return nil
}

// fakeLogs serves container logs the way the kubelet would, from what a
// test sets.
type fakeLogs struct {
	mu   sync.Mutex
	logs map[string]string // namespace/pod/container -> log
}

func (f *fakeLogs) set(ns, pod, container, log string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.logs == nil {
		f.logs = map[string]string{}
	}
	f.logs[ns+"/"+pod+"/"+container] = log
}

func (f *fakeLogs) TailLog(_ context.Context, ns, pod, container string, _ int64) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.logs[ns+"/"+pod+"/"+container]
	if !ok {
		return "", fmt.Errorf("no log for %s/%s/%s", ns, pod, container)
	}
	return l, nil
}

package operatortest

import (
	"context"
	"sync"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/engine"
	"github.com/devloop-dev/devloop/internal/identity"
)

// deployRoutes is the running reconciler's deploy engine.
var deployRoutes *routedEngine

// UseDeployEngine makes environments in ns deploy for real; elsewhere
// ScriptedDeploy answers.
func UseDeployEngine(ns string) { deployRoutes.deployNS.Store(ns, true) }

// routedEngine runs the real deploy engine in the namespaces of tests that
// asked for it (UseDeployEngine) and the scripted one everywhere else, so
// the DAG tests keep their scripted phases and the deploy tests share the
// one manager.
type routedEngine struct {
	scripted *ScriptedEngine
	real     engine.Engine
	deployNS sync.Map // namespace -> true
	// strict refuses environments without a ServiceAccount; defaulted
	// gives them the namespace's default deployer.
	strict, defaulted *identity.Identity
}

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

// ScriptedEngine stands in for the deploy engine: each component reports
// the phase a test sets (Ready by default) or an error, and every call is
// recorded.
type ScriptedEngine struct {
	mu         sync.Mutex
	phases     map[string]v1alpha1.ComponentPhase // namespace/component -> phase
	errs       map[string]error
	reconciled map[string]int
	finalized  map[string][]string // namespace -> components, in call order
}

func newScriptedEngine() *ScriptedEngine {
	return &ScriptedEngine{
		phases:     map[string]v1alpha1.ComponentPhase{},
		errs:       map[string]error{},
		reconciled: map[string]int{},
		finalized:  map[string][]string{},
	}
}

// Set scripts what the component in ns reports.
func (e *ScriptedEngine) Set(ns, component string, phase v1alpha1.ComponentPhase, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.phases[ns+"/"+component] = phase
	e.errs[ns+"/"+component] = err
}

// Calls is how often the component in ns was reconciled.
func (e *ScriptedEngine) Calls(ns, component string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.reconciled[ns+"/"+component]
}

// FinalizedIn are the components finalized in ns, in call order.
func (e *ScriptedEngine) FinalizedIn(ns string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.finalized[ns]...)
}

func (e *ScriptedEngine) Reconcile(_ context.Context, req engine.Request) (engine.Result, error) {
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

func (e *ScriptedEngine) Finalize(_ context.Context, req engine.Request) error {
	if req.Component == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.finalized[req.Env.Namespace] = append(e.finalized[req.Env.Namespace], req.Component.Name)
	return nil
}

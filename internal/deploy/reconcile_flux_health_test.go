package deploy_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// Flux's health checks (Kustomization healthChecks, wait: true) and
// `kubectl wait`-style tools read a DevEnvironment with kstatus. This test
// drives the real reconciler, build and deploy engine through the phases of
// an environment's life — created, deploying, Ready, broken by an edit,
// fixed — records every version of the object the API server holds (a
// watch), and checks kstatus's verdict on each one against the phases:
//
//	observedGeneration behind the spec                 -> InProgress
//	Stalled=True                                        -> Failed
//	Ready=True and every component in phase Ready       -> Current
//	anything else (building, deploying, blocked, ...)   -> InProgress
//
// and that the verdicts come in exactly the order a Flux user would see.
func TestFluxHealthCheckFollowsThePhases(t *testing.T) {
	g := NewWithT(t)
	ns := operatortest.DeployNamespace(t)
	pushWebSource(t, ns, webDeployment)

	rec := watchEnvironments(t, ns)
	key := operatortest.CreateEnv(t, webManifestsEnv(ns, "deploy"))

	// Deploying: the Deployment is applied but not available.
	env := waitForWebDeploying(t, key, nil)
	operatortest.ExpectKstatus(t, env, status.InProgressStatus)

	// Ready: the Deployment's pods are up.
	env = rolledOut(t, key, "web", func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.Component("web").Phase).To(Equal(v1alpha1.PhaseReady))
	})
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)

	// Broken by an edit: a layer naming a file the source lacks stalls the
	// build.
	operatortest.EditSpec(t, key, func(env *v1alpha1.DevEnvironment) {
		env.Spec.Components[0].Images[0].Layers[0].From = "bin/missing"
	})
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.ObservedGeneration).To(Equal(env.Generation))
		stalled := operatortest.EnvCondition(env, v1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Message).To(ContainSubstring(`"bin/missing" does not exist`))
	})
	g.Expect(env.Status.Component("web").Phase).To(Equal(v1alpha1.PhaseFailed))
	operatortest.ExpectKstatus(t, env, status.FailedStatus)

	// Fixed: Ready again.
	operatortest.EditSpec(t, key, func(env *v1alpha1.DevEnvironment) {
		env.Spec.Components[0].Images[0].Layers[0].From = "bin/web"
	})
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		g.Expect(env.Status.Component("web").Phase).To(Equal(v1alpha1.PhaseReady))
	})
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)

	versions := rec.stop()
	var verdicts []status.Status
	for _, u := range versions {
		// kstatus reads the object as the API server sends it, as Flux
		// does: a typed round trip would drop a zero observedGeneration.
		res, err := status.Compute(u)
		g.Expect(err).NotTo(HaveOccurred())
		v := &v1alpha1.DevEnvironment{}
		g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, v)).To(Succeed())
		want := phaseVerdict(v)
		g.Expect(res.Status).To(Equal(want), "resourceVersion %s (generation %d, observed %d, components %s, conditions %s): kstatus %s (%s)",
			v.ResourceVersion, v.Generation, v.Status.ObservedGeneration, phases(v), operatortest.ConditionsSummary(v), res.Status, res.Message)
		if n := len(verdicts); n == 0 || verdicts[n-1] != res.Status {
			verdicts = append(verdicts, res.Status)
		}
	}
	// The order of distinct verdicts is what must hold, not their count:
	// on a busy machine a stalled build may be looked at again (a wake from
	// the Deployment's own status) and read InProgress while it is, so a
	// Failed → InProgress pair more is the truth, not a defect. Every version
	// was checked against its own phases above.
	g.Expect(verdicts[0]).To(Equal(status.InProgressStatus), "kstatus over %d versions: %v", len(versions), verdicts)
	g.Expect(verdicts[len(verdicts)-1]).To(Equal(status.CurrentStatus), "kstatus over %d versions: %v", len(versions), verdicts)
	g.Expect(inOrder(verdicts,
		status.InProgressStatus, status.CurrentStatus, // created, deployed
		status.InProgressStatus, status.FailedStatus, // edited, stalled
		status.InProgressStatus, status.CurrentStatus, // fixed, Ready
	)).To(BeTrue(), "kstatus over %d versions: %v", len(versions), verdicts)
	t.Logf("kstatus checked on %d versions: %v", len(versions), verdicts)
}

// inOrder reports whether want appears in got in that order, other
// verdicts allowed between them.
func inOrder(got []status.Status, want ...status.Status) bool {
	i := 0
	for _, v := range got {
		if i < len(want) && v == want[i] {
			i++
		}
	}
	return i == len(want)
}

// phaseVerdict is what kstatus must say of env, from its phases.
func phaseVerdict(env *v1alpha1.DevEnvironment) status.Status {
	if env.Status.ObservedGeneration != env.Generation {
		return status.InProgressStatus
	}
	if meta.IsStatusConditionTrue(env.Status.Conditions, v1alpha1.ConditionStalled) {
		return status.FailedStatus
	}
	ready := len(env.Status.Components) == len(env.Spec.Components)
	for _, c := range env.Status.Components {
		ready = ready && c.Phase == v1alpha1.PhaseReady
	}
	if ready && meta.IsStatusConditionTrue(env.Status.Conditions, v1alpha1.ConditionReady) {
		return status.CurrentStatus
	}
	return status.InProgressStatus
}

func phases(env *v1alpha1.DevEnvironment) string {
	var out []string
	for _, c := range env.Status.Components {
		out = append(out, c.Name+"="+string(c.Phase))
	}
	return strings.Join(out, ",")
}

// envRecorder keeps every version of the environments of a namespace the
// API server sends on a watch, as unstructured objects.
type envRecorder struct {
	w        watch.Interface
	mu       sync.Mutex
	versions []*unstructured.Unstructured
	done     chan struct{}
}

func watchEnvironments(t *testing.T, ns string) *envRecorder {
	t.Helper()
	wc, err := client.NewWithWatch(operatortest.AdminConfig, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(v1alpha1.DevEnvironmentKind + "List"))
	w, err := wc.Watch(context.Background(), list, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	r := &envRecorder{w: w, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for ev := range w.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			r.mu.Lock()
			r.versions = append(r.versions, u.DeepCopy())
			r.mu.Unlock()
		}
	}()
	t.Cleanup(func() { w.Stop() })
	return r
}

// stop ends the watch and returns the versions seen, in order.
func (r *envRecorder) stop() []*unstructured.Unstructured {
	r.w.Stop()
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.versions
}

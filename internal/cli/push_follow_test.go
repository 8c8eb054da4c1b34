package cli

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/builder"
)

func TestAffectedComponents(t *testing.T) {
	// api depends on web, docs on nothing that uses app.
	env := teamEnv("", "").Components(
		builder.Component("api", builder.DependsOn("web"), builder.ManifestsOf("upstream")),
		builder.Component("docs", builder.ManifestsOf("upstream")),
	).Obj()
	if got, want := affectedComponents(env, "app"), []string{"web", "api"}; !slices.Equal(got, want) {
		t.Fatalf("app: %v, want %v", got, want)
	}
	if got, want := affectedComponents(env, "upstream"), []string{"crds", "web", "api", "docs"}; !slices.Equal(got, want) {
		t.Fatalf("upstream: %v, want %v", got, want)
	}
}

// rolloutCheck against the states an environment goes through after a
// push, each a function of the environment.
func TestRolloutCheck(t *testing.T) {
	const token, digest = "2026-05-04T12:00:00Z", "sha256:aaaa"
	handled := func(env *v1alpha1.DevEnvironment) {
		env.Status.LastHandledReconcileAt = token
		env.Status.Sources = []v1alpha1.SourceStatus{{Name: "app", Digest: digest}}
	}
	phases := func(web v1alpha1.ComponentPhase) func(*v1alpha1.DevEnvironment) {
		return func(env *v1alpha1.DevEnvironment) {
			handled(env)
			env.Status.Components = []v1alpha1.ComponentStatus{{Name: "crds", Phase: v1alpha1.PhaseReady}, {Name: "web", Phase: web, Message: "layer site missing"}}
		}
	}
	cases := []struct {
		name     string
		set      func(*v1alpha1.DevEnvironment)
		done     bool
		err      string
		stateHas string
	}{
		{name: "not handled yet", set: func(env *v1alpha1.DevEnvironment) { env.Status.LastHandledReconcileAt = "older" }, stateHas: "waiting for the operator"},
		{name: "handled, source still at the old digest", set: func(env *v1alpha1.DevEnvironment) {
			handled(env)
			env.Status.Sources[0].Digest = "sha256:old"
		}, stateHas: "not at the pushed digest"},
		{name: "building", set: phases(v1alpha1.PhaseBuilding), stateHas: "web Building"},
		{name: "ready", set: phases(v1alpha1.PhaseReady), done: true, stateHas: "web Ready"},
		{name: "failed", set: phases(v1alpha1.PhaseFailed), done: true, err: "component web Failed: layer site missing"},
		{name: "ready but retrying an error: phases may be stale", set: func(env *v1alpha1.DevEnvironment) {
			phases(v1alpha1.PhaseReady)(env)
			env.Status.Conditions = []metav1.Condition{operatorCondition(env, v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonWaiting, "registry answered 503")}
		}, stateHas: "retrying: registry answered 503"},
		{name: "stalled", set: func(env *v1alpha1.DevEnvironment) {
			handled(env)
			env.Status.Conditions = []metav1.Condition{operatorCondition(env, v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonInvalidSpec, "spec.components[1]: bad")}
		}, done: true, err: "Stalled (InvalidSpec): spec.components[1]: bad"},
		{name: "suspended", set: func(env *v1alpha1.DevEnvironment) { env.Spec.Suspend = true }, done: true, err: "suspended"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := teamEnv("", "team").Obj()
			env.Generation = 2
			c.set(env)
			state, done, err := rolloutCheck(token, "app", digest, []string{"web"})(env)
			if done != c.done || (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
				t.Fatalf("done %v err %v; want done %v err containing %q", done, err, c.done, c.err)
			}
			if !strings.Contains(state, c.stateHas) {
				t.Fatalf("state %q, want it to contain %q", state, c.stateHas)
			}
		})
	}
}

package cli

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/plan"
)

// usesSource says whether a component reads source directly: an image
// built from it, a chart or manifests taken from it.
func usesSource(c *v1alpha1.Component, source string) bool {
	for _, img := range c.Images {
		if img.Source == source {
			return true
		}
	}
	src, _, ok := c.DeploySource()
	return ok && src == source
}

// affectedComponents are the components a new revision of source rolls
// out: those that use it and, transitively, those that depend on them, in
// DAG order, but those turned off (offComponents). Without a valid plan
// (a cycle) only the direct users.
func affectedComponents(env *v1alpha1.DevEnvironment, source string) []string {
	p, err := plan.Build(&env.Spec)
	if err != nil {
		var out []string
		for i := range env.Spec.Components {
			if usesSource(&env.Spec.Components[i], source) {
				out = append(out, env.Spec.Components[i].Name)
			}
		}
		return out
	}
	hit, off := map[string]bool{}, offComponents(p, env)
	var visit func(string)
	visit = func(n string) {
		if hit[n] || off[n] {
			return
		}
		hit[n] = true
		for _, d := range p.Graph.Dependents(n) {
			if _, ok := p.Components[d]; ok {
				visit(d)
			}
		}
	}
	for name, c := range p.Components {
		if usesSource(c, source) {
			visit(name)
		}
	}
	var out []string
	for _, n := range p.ComponentOrder() {
		if hit[n] {
			out = append(out, n)
		}
	}
	return out
}

// rolloutCheck follows a push: done when the operator has handled the
// reconcile request token, resolved the source to the pushed digest, and
// every affected component is Ready; failed when one of them Failed or the
// environment is Stalled.
//
// A reconcile that ends on an error (a registry that is down, say) leaves
// the components after the failing one unvisited, their phases from an
// earlier reconcile. So Ready counts only when the environment is not
// Reconciling for a reason other than components still progressing.
func rolloutCheck(token, source, digest string, affected []string) check {
	return func(env *v1alpha1.DevEnvironment) (string, bool, error) {
		if env.Spec.Suspend {
			return "suspended", true, failed("devenvironment/%s is suspended (spec.suspend): the content is in the registry and rolls out once it is resumed", env.Name)
		}
		if env.Status.LastHandledReconcileAt != token {
			return "reconcile requested; waiting for the operator to pick it up", false, nil
		}
		if c := stalled(env); c != nil {
			return "Stalled (" + c.Reason + ")", true, failed("devenvironment/%s is Stalled (%s): %s", env.Name, c.Reason, c.Message)
		}
		if got := sourceDigest(env, source); got != digest {
			state := "source " + source + " not at the pushed digest yet"
			if r := conditionOf(env, v1alpha1.ConditionReady); r != nil && r.Status != metav1.ConditionTrue {
				state += ": " + firstLine(r.Message)
			}
			return state, false, nil
		}
		var parts []string
		allReady := true
		for _, name := range affected {
			st := env.Status.Component(name)
			phase := v1alpha1.PhasePending
			if st != nil && st.Phase != "" {
				phase = st.Phase
			}
			if phase == v1alpha1.PhaseFailed {
				return name + " Failed", true, failed("component %s Failed: %s", name, st.Message)
			}
			if phase != v1alpha1.PhaseReady {
				allReady = false
				part := name + " " + string(phase)
				if phase == v1alpha1.PhaseBlocked && st != nil && len(st.WaitingFor) > 0 {
					part += " (waiting for " + strings.Join(st.WaitingFor, ", ") + ")"
				}
				parts = append(parts, part)
				continue
			}
			parts = append(parts, name+" Ready")
		}
		if rc := conditionOf(env, v1alpha1.ConditionReconciling); rc != nil && rc.Status == metav1.ConditionTrue && rc.Reason != v1alpha1.ReasonProgressing {
			return strings.Join(append(parts, "retrying: "+firstLine(rc.Message)), "; "), false, nil
		}
		if len(affected) == 0 {
			return "source " + source + " resolved", true, nil
		}
		return strings.Join(parts, ", "), allReady, nil
	}
}

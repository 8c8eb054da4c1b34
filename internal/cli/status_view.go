package cli

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/plan"
)

// StatusView is what `status -o json|yaml` prints: the environment's
// status in DAG order, each component and suite with the edges the spec
// gives it. Its fields are the API's own status types, so scripts read the
// same names as in `kubectl get devenv -o yaml`.
type StatusView struct {
	Name               string             `json:"name"`
	Namespace          string             `json:"namespace"`
	Generation         int64              `json:"generation"`
	ObservedGeneration int64              `json:"observedGeneration"`
	Ready              bool               `json:"ready"`
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
	// PlanError is why the spec has no DAG (a cycle, a bad reference);
	// components and tests are then in spec order.
	PlanError              string                  `json:"planError,omitempty"`
	Sources                []v1alpha1.SourceStatus `json:"sources,omitempty"`
	Components             []ComponentView         `json:"components,omitempty"`
	Tests                  []TestView              `json:"tests,omitempty"`
	LastHandledTrigger     string                  `json:"lastHandledTrigger,omitempty"`
	LastHandledReconcileAt string                  `json:"lastHandledReconcileAt,omitempty"`
}

// ComponentView is a component's status with its dependencies.
type ComponentView struct {
	v1alpha1.ComponentStatus `json:",inline"`
	DependsOn                []string `json:"dependsOn,omitempty"`
	// WarmImages are the images the spec builds in a warm builder
	// (run.keepWarm): their build.job names that pod, not a Job.
	WarmImages []string `json:"warmImages,omitempty"`
}

// TestView is a suite's status with its dependencies and its latest run.
type TestView struct {
	v1alpha1.TestStatus `json:",inline"`
	DependsOn           []string          `json:"dependsOn,omitempty"`
	Labels              []string          `json:"labels,omitempty"`
	Trigger             string            `json:"trigger,omitempty"`
	LastRun             *v1alpha1.TestRun `json:"lastRun,omitempty"`
}

// newStatusView orders env's status by its DAG.
func newStatusView(env *v1alpha1.DevEnvironment) *StatusView {
	v := &StatusView{
		Name:                   env.Name,
		Namespace:              env.Namespace,
		Generation:             env.Generation,
		ObservedGeneration:     env.Status.ObservedGeneration,
		Ready:                  ready(env),
		Conditions:             env.Status.Conditions,
		LastHandledTrigger:     env.Status.LastHandledTrigger,
		LastHandledReconcileAt: env.Status.LastHandledReconcileAt,
	}
	for _, src := range env.Spec.Sources {
		st := v1alpha1.SourceStatus{Name: src.Name}
		if s := env.Status.Source(src.Name); s != nil {
			st = *s
		}
		v.Sources = append(v.Sources, st)
	}
	components, tests := specOrder(env)
	if p, err := plan.Build(&env.Spec); err != nil {
		v.PlanError = err.Error()
	} else {
		components, tests = p.ComponentOrder(), nil
		for _, n := range p.Order {
			if _, ok := p.Tests[n]; ok {
				tests = append(tests, n)
			}
		}
	}
	for _, name := range components {
		c := env.Spec.Component(name)
		st := v1alpha1.ComponentStatus{Name: name}
		if s := env.Status.Component(name); s != nil {
			st = *s
		}
		var warm []string
		for _, img := range c.Images {
			if img.Run != nil && img.Run.KeepWarm {
				warm = append(warm, img.Name)
			}
		}
		v.Components = append(v.Components, ComponentView{ComponentStatus: st, DependsOn: c.DependsOn, WarmImages: warm})
	}
	for _, name := range tests {
		t := specTest(env, name)
		tv := TestView{TestStatus: v1alpha1.TestStatus{Name: name}, DependsOn: t.DependsOn, Labels: t.Labels, Trigger: string(t.Trigger)}
		if s := env.Status.Test(name); s != nil {
			tv.TestStatus = *s
		}
		tv.LastRun = tv.Latest()
		v.Tests = append(v.Tests, tv)
	}
	return v
}

func specOrder(env *v1alpha1.DevEnvironment) (components, tests []string) {
	for _, c := range env.Spec.Components {
		components = append(components, c.Name)
	}
	for _, t := range env.Spec.Tests {
		tests = append(tests, t.Name)
	}
	return components, tests
}

func specTest(env *v1alpha1.DevEnvironment, name string) *v1alpha1.TestSuite {
	for i := range env.Spec.Tests {
		if env.Spec.Tests[i].Name == name {
			return &env.Spec.Tests[i]
		}
	}
	return nil
}

// declaredSuite is an error naming env's suites when it declares no suite
// called name: `kubectl devloop cancel` and the dashboard's trigger,
// cancel and test logs refuse the same way.
func declaredSuite(env *v1alpha1.DevEnvironment, name string) error {
	if specTest(env, name) != nil {
		return nil
	}
	names := make([]string, 0, len(env.Spec.Tests))
	for _, t := range env.Spec.Tests {
		names = append(names, t.Name)
	}
	return fmt.Errorf("devenvironment/%s has no test suite %q: its suites are %s", env.Name, name, strings.Join(names, ", "))
}

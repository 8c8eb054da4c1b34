package engine

import "sigs.k8s.io/controller-runtime/pkg/event"

// Set is one engine of each kind, made once (internal/operator) and
// shared by every reconcile, in the order the reconciler calls them.
type Set struct {
	// Triggers moves a trigger annotation into pending test runs.
	Triggers Engine
	// Builds builds a component's images.
	Builds Engine
	// LiveUpdate syncs a component's images into its running pods in
	// place when only their live paths changed; nil rolls every change
	// out.
	LiveUpdate Engine
	// Deploy deploys a component and removes what it deployed.
	Deploy Engine
	// Tests runs test suites as Jobs.
	Tests Engine
	// Wakes report environments whose work ended outside a reconcile (a
	// warm build, a Helm action that outlived its reconcile), so the
	// controller reconciles them at once.
	Wakes []<-chan event.GenericEvent
}

// All is every engine of the set that is not nil, in call order.
func (s Set) All() []Engine {
	var out []Engine
	for _, e := range []Engine{s.Triggers, s.Builds, s.LiveUpdate, s.Deploy, s.Tests} {
		if e != nil {
			out = append(out, e)
		}
	}
	return out
}

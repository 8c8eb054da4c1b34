package v1alpha1

// HealthSpec says which of a component's objects its Ready waits for,
// as Flux's wait and healthChecks and Helm's --wait let a team say it.
// An object not waited for is still deployed and listed; it only does not
// hold the component (and what depends on it) back.
type HealthSpec struct {
	// Wait false: Ready once deployed, no object's health waited for
	// (Flux's wait: false, Helm without --wait). Default true.
	// +optional
	Wait *bool `json:"wait,omitempty"`

	// Ignore lists objects whose health is not waited for, e.g. a custom
	// resource that cannot turn Ready on this cluster. At most 8 in an
	// environment.
	// +optional
	// +kubebuilder:validation:MaxItems=4
	Ignore []HealthIgnore `json:"ignore,omitempty"`
}

// HealthIgnore selects objects of a component by kind, and optionally
// API group and name.
type HealthIgnore struct {
	// Kind, e.g. ClusterPolicy.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// Group; any when empty.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Group string `json:"group,omitempty"`
	// Name; any when empty.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
}

// Waits says whether the component's Ready waits for the health of the
// object of group, kind and name.
func (h *HealthSpec) Waits(group, kind, name string) bool {
	if h == nil {
		return true
	}
	if h.Wait != nil && !*h.Wait {
		return false
	}
	for _, i := range h.Ignore {
		if i.Kind == kind && (i.Group == "" || i.Group == group) && (i.Name == "" || i.Name == name) {
			return false
		}
	}
	return true
}

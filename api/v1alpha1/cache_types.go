package v1alpha1

// EnvironmentCache is what an environment's builds read of other
// environments' Go build caches (the operator's team cache, served to
// builder pods through GOCACHEPROG).
type EnvironmentCache struct {
	// ReadFrom names environments whose cached compiles this one's builds
	// may use after their own, in order. Each needs the verb readcache on
	// that DevEnvironment for this environment's ServiceAccount: without it the
	// environment is Stalled naming the entry. Nothing is ever written into
	// another environment's cache, and an entry is only ever read from an
	// environment named here.
	// +optional
	// +kubebuilder:validation:MaxItems=4
	ReadFrom []CacheSource `json:"readFrom,omitempty"`
}

// CacheSource names one DevEnvironment.
type CacheSource struct {
	// Namespace of the environment.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`

	// Name of the environment.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// CacheReadFrom is spec.cache.readFrom, nil-safe.
func (e *DevEnvironment) CacheReadFrom() []CacheSource {
	if e.Spec.Cache == nil {
		return nil
	}
	return e.Spec.Cache.ReadFrom
}

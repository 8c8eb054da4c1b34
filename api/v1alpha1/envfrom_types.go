package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
)

// EnvFromSource takes every key of a ConfigMap or Secret in this namespace
// as an environment variable of a container devloop runs (a build's run
// step, a test suite), like a container's envFrom. It serves the long tail
// of variables that would not fit the environment's env budget, as
// valuesFrom serves Helm values. The kubelet reads the object when the pod
// starts, as for any pod the environment's ServiceAccount creates: the
// operator never reads it, and its content is not an input of the image's
// content hash (a changed ConfigMap does not rebuild).
type EnvFromSource struct {
	// Kind of the object.
	// +required
	// +kubebuilder:validation:Enum=ConfigMap;Secret
	Kind string `json:"kind"`

	// Name of the object in this namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')`,message="envFrom[].name must be a ConfigMap or Secret name: lower-case letters, digits, '-' and '.' (a DNS-1123 subdomain)"
	Name string `json:"name"`

	// Prefix is put before each key's name, e.g. E2E_.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^[A-Za-z_][A-Za-z0-9_]*$')`,message="envFrom[].prefix must start an environment variable name: letters, digits and '_', not starting with a digit"
	Prefix string `json:"prefix,omitempty"`

	// Optional lets the container start when the object is missing.
	// +optional
	Optional bool `json:"optional,omitempty"`
}

// ContainerEnvFrom is the containers' envFrom for refs, in order (a later
// source wins for a key both hold; a container's env wins over all).
func ContainerEnvFrom(refs []EnvFromSource) []corev1.EnvFromSource {
	if len(refs) == 0 {
		return nil
	}
	out := make([]corev1.EnvFromSource, 0, len(refs))
	for _, r := range refs {
		ref := corev1.LocalObjectReference{Name: r.Name}
		optional := new(bool)
		*optional = r.Optional
		s := corev1.EnvFromSource{Prefix: r.Prefix}
		if r.Kind == "Secret" {
			s.SecretRef = &corev1.SecretEnvSource{LocalObjectReference: ref, Optional: optional}
		} else {
			s.ConfigMapRef = &corev1.ConfigMapEnvSource{LocalObjectReference: ref, Optional: optional}
		}
		out = append(out, s)
	}
	return out
}

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Source is a named input: a git repository, an OCI artifact (what
// `kubectl devloop push` writes), an artifact of a Flux source object, or
// the output of a build step. Exactly one of git, oci, sourceRef and output
// is set.
//
// +kubebuilder:validation:XValidation:rule="[has(self.git), has(self.oci), has(self.sourceRef), has(self.output)].filter(x, x).size() == 1",message="exactly one of git, oci, sourceRef or output must be set"
type Source struct {
	// Name identifies the source within the environment; images, charts,
	// manifests and tests refer to it by this name. A DNS-1123 label.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')`,message="must be lower-case letters, digits and '-', starting and ending with a letter or digit (a DNS-1123 label)"
	Name string `json:"name"`

	// Git fetches a repository at a branch, tag or commit.
	// +optional
	Git *GitSource `json:"git,omitempty"`

	// OCI fetches an OCI artifact (a tarball layer) by tag or digest.
	// +optional
	OCI *OCISource `json:"oci,omitempty"`

	// SourceRef uses the artifact of a Flux source-controller object; its
	// digest is verified after download.
	// +optional
	SourceRef *FluxSourceReference `json:"sourceRef,omitempty"`

	// Output is a directory a run step of this environment produces
	// (images[].run.outputs): generated CRDs, RBAC or a bundle. A component
	// using this source depends on the component building that image, and
	// is deployed with what its latest build produced.
	// +optional
	Output *BuildOutputReference `json:"output,omitempty"`

	// Interval is how often a moving reference (a branch, an OCI tag) is
	// resolved again. A reconcile request resolves it at once regardless.
	// +optional
	// +kubebuilder:default="1m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$')`,message="must be a duration such as 30s, 5m or 1h30m"
	Interval *metav1.Duration `json:"interval,omitempty"`
}

// GitSource is a git repository.
type GitSource struct {
	// URL of the repository, HTTPS or SSH.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^(https?|ssh)://.+|^[a-zA-Z0-9._-]+@[a-zA-Z0-9._-]+:.+')`,message="must be an https://, http:// or ssh:// URL, or user@host:path"
	URL string `json:"url"`

	// Ref selects what to check out; the default branch when empty.
	// +optional
	Ref *GitRef `json:"ref,omitempty"`

	// SecretRef names a Secret with HTTPS (username, password) or SSH
	// (identity, known_hosts) credentials.
	// +optional
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`
}

// GitRef selects a branch, a tag or a commit; at most one.
//
// +kubebuilder:validation:XValidation:rule="[has(self.branch), has(self.tag), has(self.commit)].filter(x, x).size() <= 1",message="at most one of branch, tag or commit may be set"
type GitRef struct {
	// Branch to follow.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	Branch string `json:"branch,omitempty"`

	// Tag to check out.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	Tag string `json:"tag,omitempty"`

	// Commit SHA to check out.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^[0-9a-f]{7,64}$')`,message="must be a commit SHA: 7 to 64 lower-case hex digits"
	Commit string `json:"commit,omitempty"`
}

// OCISource is an OCI artifact in a registry.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.tag) && has(self.digest))",message="set tag or digest, not both"
type OCISource struct {
	// Repository of the artifact, without tag or digest,
	// e.g. localhost:5000/team-a/src/app.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^[a-zA-Z0-9]([a-zA-Z0-9.-]*[a-zA-Z0-9])?(:[0-9]{1,5})?(/[a-z0-9]+([._-]+[a-z0-9]+)*)+$')`,message="must be a repository host[:port]/path with no scheme, e.g. 10.250.0.1:5000/team/src"
	Repository string `json:"repository"`

	// Tag to follow; resolved to a digest every interval. "latest" when
	// neither tag nor digest is set.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127}$')`,message="must be a tag: up to 128 letters, digits, '_', '.' and '-', not starting with '.' or '-'"
	Tag string `json:"tag,omitempty"`

	// Digest pins the artifact, e.g. sha256:...
	// +optional
	// +kubebuilder:validation:MaxLength=71
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^sha256:[a-f0-9]{64}$')`,message="must be a digest: sha256: and 64 lower-case hex digits"
	Digest string `json:"digest,omitempty"`

	// Insecure allows plain HTTP to this registry.
	// +optional
	Insecure bool `json:"insecure,omitempty"`

	// SecretRef names a kubernetes.io/dockerconfigjson Secret for pulling.
	// +optional
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`
}

// FluxSourceReference names a Flux source-controller object whose artifact
// is used as the source.
type FluxSourceReference struct {
	// Kind of the Flux source.
	// +required
	// +kubebuilder:validation:Enum=GitRepository;OCIRepository;Bucket
	Kind string `json:"kind"`

	// Name of the Flux source.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// Namespace of the Flux source; this namespace when empty. Refused when
	// the operator runs with --no-cross-namespace-refs.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')`,message="must be lower-case letters, digits and '-', starting and ending with a letter or digit (a DNS-1123 label)"
	Namespace string `json:"namespace,omitempty"`
}

// BuildOutputReference names an output of an image's run step.
type BuildOutputReference struct {
	// Image whose run step produces the output.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Image string `json:"image"`

	// Name of the output in images[].run.outputs.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
}

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DevEnvironmentKind is the kind of the DevEnvironment resource.
const DevEnvironmentKind = "DevEnvironment"

// DevEnvironmentSpec declares a development loop: where images go, the
// sources they come from, the components to build and deploy in dependency
// order, and the test suites that can be run against them.
//
// Cross-field rules live here because only the spec sees every list at once.
// Lists are bounded so that validation cost is bounded and the spec, apart
// from free-form Helm values, stays well under the object size limit.
//
// +kubebuilder:validation:XValidation:rule="!has(self.components) || !has(self.tests) || self.tests.all(t, !self.components.exists(c, c.name == t.name))",message="names must be unique across components and tests: a test suite has the name of a component",fieldPath=".tests"
// +kubebuilder:validation:XValidation:rule="!has(self.components) || self.components.all(c, !has(c.dependsOn) || c.dependsOn.all(d, self.components.exists(o, o.name == d)))",message="components[].dependsOn must name components of this environment: a dependency does not exist",fieldPath=".components"
// +kubebuilder:validation:XValidation:rule="!has(self.tests) || self.tests.all(t, !has(t.dependsOn) || t.dependsOn.all(d, self.tests.exists(o, o.name == d) || (has(self.components) && self.components.exists(o, o.name == d))))",message="tests[].dependsOn must name components or test suites of this environment: a dependency does not exist",fieldPath=".tests"
// +kubebuilder:validation:XValidation:rule="!has(self.components) || self.components.all(c, !has(c.images) || c.images.all(i, !has(i.source) || (has(self.sources) && self.sources.exists(s, s.name == i.source))))",message="components[].images[].source must name one of spec.sources: an image uses a source that does not exist",fieldPath=".components"
// +kubebuilder:validation:XValidation:rule="!has(self.components) || self.components.all(c, (!has(c.helm) || !has(c.helm.chart.source) || (has(self.sources) && self.sources.exists(s, s.name == c.helm.chart.source))) && (!has(c.manifests) || (has(self.sources) && self.sources.exists(s, s.name == c.manifests.source))))",message="components[].helm.chart.source and components[].manifests.source must name one of spec.sources: a chart or manifests source does not exist",fieldPath=".components"
// +kubebuilder:validation:XValidation:rule="!has(self.tests) || self.tests.all(t, !has(t.source) || (has(self.sources) && self.sources.exists(s, s.name == t.source)))",message="tests[].source must name one of spec.sources: a suite uses a source that does not exist",fieldPath=".tests"
// +kubebuilder:validation:XValidation:rule="!has(self.tests) || self.tests.all(t, !has(t.image.built) || (has(self.components) && self.components.exists(c, has(c.images) && c.images.exists(i, i.name == t.image.built))))",message="tests[].image.built must name an image built by a component: a suite runs an image nobody builds",fieldPath=".tests"
// +kubebuilder:validation:XValidation:rule="!has(self.components) || self.components.all(c, !has(c.helm) || !has(c.helm.imageValues) || c.helm.imageValues.all(v, self.components.exists(o, has(o.images) && o.images.exists(i, i.name == v.image))))",message="components[].helm.imageValues[].image must name an image built by a component: an imageValues entry names an unknown image",fieldPath=".components"
// +kubebuilder:validation:XValidation:rule="!has(self.components) || self.components.all(c, !has(c.images) || c.images.all(i, self.components.filter(o, has(o.images) && o.images.exists(j, j.name == i.name)).size() == 1))",message="image names must be unique across components: each names the repository <registry.prefix>/<name>",fieldPath=".components"
// +kubebuilder:validation:XValidation:rule="!has(self.components) || self.components.map(c, has(c.images) ? size(c.images) : 0).sum() <= 16",message="at most 16 images in one environment",fieldPath=".components"
// +kubebuilder:validation:XValidation:rule="!has(self.components) || self.components.map(c, (has(c.helm) && has(c.helm.patches) ? size(c.helm.patches) : 0) + (has(c.manifests) && has(c.manifests.patches) ? size(c.manifests.patches) : 0)).sum() <= 16",message="at most 16 patches in one environment",fieldPath=".components"
// +kubebuilder:validation:XValidation:rule="!has(self.components) || self.components.map(c, has(c.ports) ? size(c.ports) : 0).sum() <= 16",message="at most 16 ports in one environment",fieldPath=".components"
// +kubebuilder:validation:XValidation:rule="!has(self.components) || self.components.map(c, has(c.health) && has(c.health.ignore) ? size(c.health.ignore) : 0).sum() <= 8",message="at most 8 health.ignore entries in one environment",fieldPath=".components"
// +kubebuilder:validation:XValidation:rule="!has(self.components) || self.components.map(c, has(c.images) ? c.images.map(i, has(i.liveUpdate) ? size(i.liveUpdate.paths) + (has(i.liveUpdate.command) ? size(i.liveUpdate.command) : 0) : 0).sum() : 0).sum() <= 48",message="at most 48 liveUpdate paths and command arguments (components[].images[].liveUpdate.paths and .command together) in one environment",fieldPath=".components"
// +kubebuilder:validation:XValidation:rule="(has(self.components) ? self.components.map(c, has(c.images) ? c.images.map(i, (has(i.env) ? size(i.env) : 0) + (has(i.run) && has(i.run.env) ? size(i.run.env) : 0)).sum() : 0).sum() : 0) + (has(self.tests) ? self.tests.map(t, has(t.env) ? size(t.env) : 0).sum() : 0) <= 48",message="at most 48 env entries in one environment (components[].images[].env, components[].images[].run.env and tests[].env together): put the rest in a ConfigMap or Secret and name it in envFrom"
// +kubebuilder:validation:XValidation:rule="(has(self.components) ? self.components.map(c, has(c.images) ? c.images.map(i, has(i.run) ? size(i.run.command) : 0).sum() : 0).sum() : 0) + (has(self.tests) ? self.tests.map(t, size(t.command)).sum() : 0) <= 96",message="at most 96 command arguments in one environment (components[].images[].run.command and tests[].command together): a longer command belongs in a script in the source"
// +kubebuilder:validation:XValidation:rule="(has(self.components) ? self.components.map(c, has(c.images) ? c.images.map(i, has(i.run) && has(i.run.envFrom) ? size(i.run.envFrom) : 0).sum() : 0).sum() : 0) + (has(self.tests) ? self.tests.map(t, has(t.envFrom) ? size(t.envFrom) : 0).sum() : 0) <= 16",message="at most 16 envFrom entries in one environment (components[].images[].run.envFrom and tests[].envFrom together)"
// +kubebuilder:validation:XValidation:rule="has(self.registry) || !has(self.components) || !self.components.exists(c, has(c.images))",message="registry is required when a component builds images",fieldPath=".registry"
type DevEnvironmentSpec struct {
	// Suspend stops reconciliation: nothing is built, deployed or run and
	// what is deployed stays as it is. Resuming picks up every change made in
	// the meantime.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// ServiceAccountName is the ServiceAccount, in this namespace, that every
	// write of this environment is impersonated as (Helm releases, manifests,
	// builder and test Jobs). A user who may create a DevEnvironment gains no
	// rights through it. Empty means the operator's --default-service-account.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')`,message="must be a ServiceAccount name: lower-case letters, digits, '-' and '.' (a DNS-1123 subdomain)"
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// Registry is where built images are pushed. Required when any component
	// builds images.
	// +optional
	Registry *RegistrySpec `json:"registry,omitempty"`

	// Sources are the named inputs images, charts, manifests and tests are
	// made from. The resolved revision and digest of each is recorded in
	// status.sources.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	Sources []Source `json:"sources,omitempty"`

	// ChartCredentials are used for chart repositories and registries —
	// the charts' own and their dependencies' — each only for URLs starting
	// with its prefix. Dependencies listed in a chart's Chart.yaml
	// (repository, oci:// and file://) are resolved as helm dependency
	// build does, honouring Chart.lock.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	ChartCredentials []ChartCredentials `json:"chartCredentials,omitempty"`

	// Components are the nodes of the dependency graph: each builds images
	// and deploys a Helm chart or manifests once every component it depends
	// on is Ready.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Components []Component `json:"components,omitempty"`

	// Tests are suites run as Jobs on request (the `trigger` annotation) or
	// after each rollout of the components they depend on.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Tests []TestSuite `json:"tests,omitempty"`

	// HistoryLimit is how many runs per test suite are kept in status (and
	// their Jobs in the cluster). Older runs are garbage-collected.
	// +optional
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	HistoryLimit *int32 `json:"historyLimit,omitempty"`

	// Cache is the environment's Go build cache as a team shares it: its
	// builds write only its own entries and may read those of the
	// environments named in readFrom (see docs/team-cache.md).
	// +optional
	Cache *EnvironmentCache `json:"cache,omitempty"`
}

// RegistrySpec says where built images are pushed and how nodes pull them.
type RegistrySpec struct {
	// Prefix is prepended to every image name: image "controller" with prefix
	// "localhost:5000/team-a" is pushed to "localhost:5000/team-a/controller".
	// A host with optional port and path; no scheme, no tag.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=200
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^[a-zA-Z0-9]([a-zA-Z0-9.-]*[a-zA-Z0-9])?(:[0-9]{1,5})?(/[a-z0-9]+([._-]+[a-z0-9]+)*)*$')`,message="must be host[:port] with an optional /path and no scheme, e.g. 10.250.0.1:5000/team (plain HTTP is set with insecure)"
	Prefix string `json:"prefix"`

	// Insecure allows plain HTTP to the registry. Without it devloop uses
	// HTTPS only, also for localhost and private addresses: it never falls
	// back to HTTP silently.
	// +optional
	Insecure bool `json:"insecure,omitempty"`

	// PullPrefix is how nodes name the same registry when it differs from how
	// the operator reaches it (kind's local-registry pattern). Deployed image
	// references use it; pushes use Prefix.
	// +optional
	// +kubebuilder:validation:MaxLength=200
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^[a-zA-Z0-9]([a-zA-Z0-9.-]*[a-zA-Z0-9])?(:[0-9]{1,5})?(/[a-z0-9]+([._-]+[a-z0-9]+)*)*$')`,message="must be host[:port] with an optional /path and no scheme, e.g. 10.250.0.1:5000/team (plain HTTP is set with insecure)"
	PullPrefix string `json:"pullPrefix,omitempty"`

	// CredentialsRef names a Secret of type kubernetes.io/dockerconfigjson in
	// this namespace used to push and pull. It is read by reference only,
	// never copied into status or events.
	// +optional
	CredentialsRef *LocalObjectReference `json:"credentialsRef,omitempty"`
}

// LocalObjectReference names an object in the DevEnvironment's namespace.
type LocalObjectReference struct {
	// Name of the referenced object.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// DevEnvironment is a team's inner development loop, reconciled in the
// cluster: sources are fetched, images built and pushed, components deployed
// in dependency order and test suites run as Jobs on request.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=devenv;devenvs,categories=devloop
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Status",type="string",JSONPath=".status.summary"
// +kubebuilder:printcolumn:name="Components",type="string",JSONPath=".status.componentsReady"
// +kubebuilder:printcolumn:name="Last-Test",type="string",JSONPath=".status.lastTestResult"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type DevEnvironment struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec declares the environment.
	// +optional
	Spec DevEnvironmentSpec `json:"spec,omitempty"`

	// Status is what the operator observed and did.
	// Defaulted to {observedGeneration: 0} on read, so an environment the
	// operator has not reconciled yet reads as InProgress to kstatus (Flux
	// health checks, kubectl wait), not as a Current object without status.
	// +optional
	// +kubebuilder:default={}
	Status DevEnvironmentStatus `json:"status,omitempty"`
}

// DevEnvironmentList is a list of DevEnvironments.
//
// +kubebuilder:object:root=true
type DevEnvironmentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DevEnvironment `json:"items"`
}

func init() {
	SchemeBuilder.Register(&DevEnvironment{}, &DevEnvironmentList{})
}

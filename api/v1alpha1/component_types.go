package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Component is a node of the dependency graph. It builds images, deploys a
// Helm chart or a set of manifests (not both), or only builds images that
// others use (a second image pushed under a revision tag, say).
//
// +kubebuilder:validation:XValidation:rule="has(self.images) || has(self.helm) || has(self.manifests)",message="a component needs at least one of images, helm or manifests"
// +kubebuilder:validation:XValidation:rule="!(has(self.helm) && has(self.manifests))",message="set helm or manifests, not both: split them into two components"
// +kubebuilder:validation:XValidation:rule="!has(self.health) || has(self.helm) || has(self.manifests)",message="health applies to what helm or manifests deploy: set one of them",fieldPath=".health"
// +kubebuilder:validation:XValidation:rule="!has(self.dependsOn) || !self.dependsOn.exists(d, d == self.name)",messageExpression="'component ' + self.name + ' depends on itself'",fieldPath=".dependsOn"
type Component struct {
	// Name identifies the component; dependsOn and the status refer to it.
	// Unique across components and tests. A DNS-1123 label.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')`,message="must be lower-case letters, digits and '-', starting and ending with a letter or digit (a DNS-1123 label)"
	Name string `json:"name"`

	// DependsOn names components that must be Ready before this one is built
	// or deployed — on every change, not only the first: a dependency being
	// rolled out again blocks this component until it is Ready again.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=63
	DependsOn []string `json:"dependsOn,omitempty"`

	// Labels group components, e.g. for `kubectl devloop status -l core`.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:XValidation:rule=`self.matches(r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')`,message="must be lower-case letters, digits and '-', starting and ending with a letter or digit (a DNS-1123 label)"
	Labels []string `json:"labels,omitempty"`

	// Images built by this component and pushed to the registry. At most 16
	// images across the environment.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	Images []ImageSpec `json:"images,omitempty"`

	// Helm deploys a chart as one release.
	// +optional
	Helm *HelmSpec `json:"helm,omitempty"`

	// Manifests applies plain YAML or kustomize directories with server-side
	// apply; objects that leave the set are pruned.
	// +optional
	Manifests *ManifestsSpec `json:"manifests,omitempty"`

	// Health says which deployed objects Ready waits for. Default: all.
	// +optional
	Health *HealthSpec `json:"health,omitempty"`

	// Enabled false turns the component off: nothing of it is built or
	// deployed (what it deployed is removed), and what depends on it is
	// Blocked naming it. A kustomize patch or a Flux substitution flips it
	// per cluster (Dynamo's subsystem toggles). Default true.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// OnDemand components are built and deployed only once brought up —
	// `kubectl devloop up ENV COMPONENT`, or a triggered test suite that
	// depends on it — and then stay up until `kubectl devloop down`
	// (Volcano's kwok install, a monitoring stack).
	// +optional
	OnDemand bool `json:"onDemand,omitempty"`

	// Ports are forwarded to the developer's machine by
	// `kubectl devloop port-forward ENV` (and push --watch), following pods
	// across rollouts. At most 16 in one environment.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=4
	Ports []PortForward `json:"ports,omitempty"`
}

// PortForward is a local port forwarded to a port of something the
// component deploys.
type PortForward struct {
	// Name of the forward, e.g. ui. A DNS-1123 label.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')`,message="must be lower-case letters, digits and '-', starting and ending with a letter or digit (a DNS-1123 label)"
	Name string `json:"name"`

	// Local port on the developer's machine.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Local int32 `json:"local"`

	// Target is kind/name:port, e.g. svc/grafana:80, deploy/web:http or
	// pod/debug:40000 (a port number or name).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^(svc|service|deploy|deployment|sts|statefulset|pod)/[a-z0-9]([-a-z0-9.]*[a-z0-9])?:([0-9]{1,5}|[a-z0-9]([-a-z0-9]*[a-z0-9])?)$')`,message="must be kind/name:port with kind svc, deploy, sts or pod, e.g. svc/grafana:80"
	Target string `json:"target"`

	// Namespace of the target; the component's (the release's or the
	// manifests' namespace) when empty.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
}

// ImageSpec is an image assembled with go-containerregistry, without a
// Docker daemon: a base image, one layer per mapping taken from the source
// (after an optional build step), and the image config. Its repository is
// <registry.prefix>/<name>.
//
// +kubebuilder:validation:XValidation:rule="!has(self.layers) || has(self.source)",message="layers are taken from a source: set source",fieldPath=".source"
// +kubebuilder:validation:XValidation:rule="!has(self.run) || has(self.source)",message="a run step builds from a source: set source",fieldPath=".source"
type ImageSpec struct {
	// Name of the image; the repository is <registry.prefix>/<name>. Unique
	// across the environment. Lowercase, may contain '/', '.', '_' and '-'.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^[a-z0-9]+([._-]+[a-z0-9]+)*(/[a-z0-9]+([._-]+[a-z0-9]+)*)*$')`,message="must be lower-case letters and digits, separated by '.', '_', '-' or '/' (a repository path such as tools/ginkgo)"
	Name string `json:"name"`

	// Source the layers (and the run step's workspace) come from.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Source string `json:"source,omitempty"`

	// Base image the layers are appended to, e.g.
	// gcr.io/distroless/static:nonroot. Resolved to a digest and cached.
	// Empty means an empty (scratch) base.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Base string `json:"base,omitempty"`
	// BaseInsecure pulls the base image over plain HTTP, for a base on a
	// registry without TLS other than spec.registry's (which
	// spec.registry.insecure covers).
	// +optional
	BaseInsecure bool `json:"baseInsecure,omitempty"`

	// Run is an optional compile step in a builder pod in the cluster; its
	// output in /workspace is what layers take files from.
	// +optional
	Run *BuildRun `json:"run,omitempty"`

	// Paths of the source the image is made from, when not all of it: a
	// change elsewhere in the source neither rebuilds nor re-pushes the
	// image (Skaffold's dependencies.paths, Tilt's only). Two images built
	// from one repository then rebuild only for their own changes; the
	// build still sees the whole source. Entries are patterns anchored at
	// the source's root: '*' matches within one path segment, '?' one
	// character, '[a-z]' a class, and a "**" segment any number of
	// segments; an entry that matches a directory takes everything under
	// it ("pkg/scheduler"). An entry starting with '!' excludes what
	// earlier entries include (e.g. "!pkg/**/*_test.go"); for each file
	// the last entry that matches it decides. "go:<dir>" (e.g.
	// "go:cmd/scheduler") takes what that Go package's build reads: the
	// package and the packages it imports, transitively, in its module or
	// vendor/ (the files in their directories but tests; files a package
	// embeds from a subdirectory need an entry of their own), with go.mod
	// and go.sum. An include that matches no file stalls the environment,
	// naming it. Default: the whole source. This is an optimisation only: an image
	// whose files come out byte-identical has the same digest and rolls
	// nothing out, whatever its paths.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=64
	// +kubebuilder:validation:items:XValidation:rule="!self.matches('^!?/') && !self.matches('(^|/)[.][.](/|$)')",message="paths must be relative paths inside the source, without '..' (a leading '!' excludes)"
	Paths []string `json:"paths,omitempty"`

	// Layers map files from the source (or the run step's output) into the
	// image, one layer each, so a change to one file uploads one layer.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	Layers []LayerMapping `json:"layers,omitempty"`

	// Entrypoint of the image config.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=256
	Entrypoint []string `json:"entrypoint,omitempty"`

	// Cmd of the image config (the default arguments).
	// +optional
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=256
	Cmd []string `json:"cmd,omitempty"`

	// Env of the image config. Counts towards the environment's 48 env
	// entries.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	Env []EnvVar `json:"env,omitempty"`

	// WorkingDir of the image config.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	WorkingDir string `json:"workingDir,omitempty"`

	// User of the image config, e.g. "65532:65532".
	// +optional
	// +kubebuilder:validation:MaxLength=64
	User string `json:"user,omitempty"`

	// Platforms to build, as os/arch[/variant]. More than one produces an
	// image index. Default: linux/amd64.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:items:XValidation:rule=`self.matches(r'^[a-z0-9]+/[a-z0-9]+(/[a-z0-9]+)?$')`,message="must be a platform os/arch[/variant], e.g. linux/arm64"
	// +kubebuilder:validation:items:MaxLength=32
	Platforms []string `json:"platforms,omitempty"`

	// Tags pushed for every build, all naming the same digest. Each is a
	// literal tag or a template over {{ .ContentHash }}, {{ .Revision }},
	// {{ .ShortRevision }}, {{ .Source }}, {{ .Image }} and {{ .Component }}.
	// The content tag is always pushed too; the Deployment uses it, while a
	// revision tag serves pods the software under development creates itself.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=128
	// +kubebuilder:validation:items:XValidation:rule=`self.matches(r'^([a-zA-Z0-9_.-]|\{\{ ?\.(ContentHash|Revision|ShortRevision|Source|Image|Component) ?\}\})+$')`,message="must be a tag template of letters, digits, '_', '.', '-' and {{ .ContentHash }}, {{ .Revision }}, {{ .ShortRevision }}, {{ .Source }}, {{ .Image }} or {{ .Component }}"
	Tags []string `json:"tags,omitempty"`

	// SharedRepository says the image's repository is shared on purpose:
	// a tag pushed by another image that also sets it (or a tool) is moved
	// only when this image's content changed, never back. Without it, on
	// either side, such a build is Stalled (TagMoved).
	// +optional
	SharedRepository bool `json:"sharedRepository,omitempty"`

	// LiveUpdate lets changes to some of the image's paths reach the
	// running pods in place, without a rollout (see LiveUpdate).
	// +optional
	LiveUpdate *LiveUpdate `json:"liveUpdate,omitempty"`
}

// BuildRun is a compile step run in a builder pod: the source is fetched into
// /workspace, then the builder image runs the command there.
type BuildRun struct {
	// Image of the builder, e.g. golang:1.25.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image"`

	// Command run in /workspace. Each item is a template over
	// {{ .Revision }}, {{ .ShortRevision }}, {{ .Source }}, {{ .Image }}
	// (this image's name), {{ .ImageBase }} (its last path segment, so one
	// run spec serves several images, e.g. make {{ .ImageBase }}) and
	// {{ .Component }}, and may read images built by components earlier in
	// the DAG: {{ (image "operator").Reference }} (repository@digest), and
	// .Repository, .Digest, .Tag. Naming an image makes this component
	// depend on the one that builds it. At most 96 command arguments in
	// one environment (run steps and test suites together).
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=512
	Command []string `json:"command"`

	// Env of the builder container. The build runs as UID 65532 (restricted
	// Pod Security) with HOME=/home/devloop, GOOS, GOARCH and TARGETPLATFORM
	// set for the platform being built, and DEVLOOP_REVISION and
	// DEVLOOP_SHORT_REVISION; these entries come after and win. Values are
	// templates, as in command (e.g. VERSION={{ .ShortRevision }}). At
	// most 48 env entries in one environment (images' env, run steps' env
	// and test suites' env together); envFrom takes the rest.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	Env []EnvVar `json:"env,omitempty"`

	// EnvFrom takes every key of ConfigMaps or Secrets in this namespace
	// as variables of the builder container, for more variables than the
	// environment's env budget holds. Env entries win over them. At most
	// 16 envFrom entries in one environment.
	// +optional
	// +kubebuilder:validation:MaxItems=4
	EnvFrom []EnvFromSource `json:"envFrom,omitempty"`

	// Outputs are directories of /workspace the run step produces that
	// later components deploy — generated CRDs, RBAC, a bundle: each is
	// pushed as an artifact next to the image and becomes a source through
	// spec.sources[].output, with a digest like any source.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=4
	Outputs []RunOutput `json:"outputs,omitempty"`

	// Cache is a persistent volume kept between builds (Go module and build
	// caches, say).
	// +optional
	Cache *BuildCache `json:"cache,omitempty"`

	// Timeout of the build step.
	// +optional
	// +kubebuilder:default="15m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$')`,message="must be a duration such as 30s, 5m or 1h30m"
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// KeepWarm keeps a builder pod running between builds of this image
	// and runs each build in it (through the pods/exec API, as the
	// environment's ServiceAccount, which then needs get and create on
	// pods/exec, best granted on the warm pod's name only), instead of
	// starting a Job per build: no pod to schedule and start per change,
	// and the compiler's caches stay warm. Credentials stay in the pod's
	// fetch-push container, never in the one running the command. The pod
	// is replaced when the run spec changes. Each build still starts from
	// the fetched source in a cleared workspace.
	// +optional
	KeepWarm bool `json:"keepWarm,omitempty"`
}

// RunOutput is a directory a run step produces for other components.
type RunOutput struct {
	// Name of the output; spec.sources[].output.name refers to it. A
	// DNS-1123 label.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')`,message="must be lower-case letters, digits and '-', starting and ending with a letter or digit (a DNS-1123 label)"
	Name string `json:"name"`

	// Path of the directory in /workspace, relative, e.g. config/crd/bases.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.matches('(^|/)[.][.](/|$)')",message="path must be relative to /workspace, without '..'"
	Path string `json:"path"`
}

// BuildCache is a PersistentVolumeClaim mounted into the builder.
type BuildCache struct {
	// Size of the claim.
	// +optional
	// +kubebuilder:default="5Gi"
	Size *resource.Quantity `json:"size,omitempty"`

	// Paths where the cache is mounted in the builder container. Default:
	// /home/devloop/.cache (Go's build cache under the builder's HOME) and
	// /go/pkg/mod. The build runs as UID 65532 with HOME=/home/devloop, so
	// paths under /root (mode 0700 in most images) are not reachable.
	// +optional
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:items:MaxLength=256
	// +kubebuilder:validation:items:XValidation:rule=`self.matches(r'^/')`,message="must be an absolute path, starting with /"
	Paths []string `json:"paths,omitempty"`
}

// LayerMapping copies a file or directory into the image as one layer.
type LayerMapping struct {
	// From is a path relative to the source root (or the run step's
	// /workspace). It may not leave the source.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.matches('(^|/)[.][.](/|$)')",message="from must be a relative path inside the source, without '..'"
	From string `json:"from"`

	// To is the absolute path in the image.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^/')`,message="must be an absolute path, starting with /"
	To string `json:"to"`

	// Mode of the copied files as an octal string, e.g. "0755". Default:
	// the mode in the source.
	// +optional
	// +kubebuilder:validation:MaxLength=4
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^0?[0-7]{3}$')`,message="must be an octal file mode such as 0755 or 644"
	Mode string `json:"mode,omitempty"`
}

// EnvVar is a name and a value.
type EnvVar struct {
	// Name of the variable.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^[A-Za-z_][A-Za-z0-9_]*$')`,message="must be an environment variable name: letters, digits and '_', not starting with a digit"
	Name string `json:"name"`

	// Value of the variable.
	// +optional
	// +kubebuilder:validation:MaxLength=320
	Value string `json:"value,omitempty"`
}

// HelmSpec deploys one Helm release.
type HelmSpec struct {
	// Chart to install.
	// +required
	Chart ChartRef `json:"chart"`

	// ReleaseName of the Helm release; the component name when empty.
	// +optional
	// +kubebuilder:validation:MaxLength=53
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')`,message="must be lower-case letters, digits and '-', starting and ending with a letter or digit (a DNS-1123 label)"
	ReleaseName string `json:"releaseName,omitempty"`

	// Namespace the release is installed in; this namespace when empty.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')`,message="must be lower-case letters, digits and '-', starting and ending with a letter or digit (a DNS-1123 label)"
	Namespace string `json:"namespace,omitempty"`

	// CreateNamespace creates the release namespace when it is missing.
	// +optional
	CreateNamespace bool `json:"createNamespace,omitempty"`

	// ValuesFiles are values files layered over the chart's defaults, in
	// order, before values: paths relative to the root of the chart's
	// source (for an oci or repo chart, to the chart's own directory),
	// e.g. installer/helm/chart/volcano/values.yaml and a dev override
	// next to it. A file that does not exist stops the component.
	// +optional
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:items:MaxLength=128
	// +kubebuilder:validation:items:XValidation:rule="!self.startsWith('/') && !self.matches('(^|/)[.][.](/|$)')",message="values files must be relative paths without '..'"
	ValuesFiles []string `json:"valuesFiles,omitempty"`

	// Values override the chart's defaults. Layering, last wins: chart
	// defaults, valuesFiles (in order), values, valuesFrom (in order),
	// imageValues. All components' values together are at most 32 KiB of
	// JSON (MaxHelmValues; more stalls the environment): larger values
	// belong in valuesFrom.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Values *apiextensionsv1.JSON `json:"values,omitempty"`

	// ValuesFrom reads values from ConfigMap or Secret keys in this
	// namespace, applied in order after values.
	// +optional
	// +kubebuilder:validation:MaxItems=4
	ValuesFrom []ValuesReference `json:"valuesFrom,omitempty"`

	// ImageValues writes a built image's reference, or part of it, into a
	// values path — for image fields Helm cannot see as images, such as a tag
	// in a custom resource that the operator under development reads.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	ImageValues []ImageValue `json:"imageValues,omitempty"`

	// SkipCRDs installs the chart without the CRDs in its crds/ directory
	// (helm install --skip-crds), for CRDs another component applies.
	// +optional
	SkipCRDs bool `json:"skipCRDs,omitempty"`

	// Patches change what the chart renders before it is applied (a Helm
	// post-renderer), hooks included: a container's args for a debug
	// build, a securityContext, an env var in a third-party pod. A patch
	// that matches no rendered object stops the component. At most 16
	// patches in one environment.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	Patches []Patch `json:"patches,omitempty"`

	// Timeout of each Helm action, capped at the operator's maximum
	// (--max-helm-timeout, 8m unless the operator says otherwise; status
	// says when the cap applies). A pending release that devloop did not
	// write is left alone this long (and a minute) after it started.
	// +optional
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$')`,message="must be a duration such as 30s, 5m or 1h30m"
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// ChartRef locates a chart: a path in a source, an OCI reference with a
// version, or a chart in an HTTP repository. Exactly one of source, oci and
// repo is set.
//
// +kubebuilder:validation:XValidation:rule="[has(self.source), has(self.oci), has(self.repo)].filter(x, x).size() == 1",message="exactly one of source, oci or repo must be set"
// +kubebuilder:validation:XValidation:rule="!has(self.source) || has(self.path)",message="a chart from a source needs path",fieldPath=".path"
// +kubebuilder:validation:XValidation:rule="!has(self.repo) || has(self.name)",message="a chart from a repository needs name",fieldPath=".name"
type ChartRef struct {
	// Source holding the chart; path is relative to its root.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Source string `json:"source,omitempty"`

	// Path of the chart directory inside source.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.matches('(^|/)[.][.](/|$)')",message="path must be relative to the source root, without '..'"
	Path string `json:"path,omitempty"`

	// OCI is a chart reference of the form oci://host/repo/chart.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^oci://.+')`,message="must be a chart reference starting with oci://"
	OCI string `json:"oci,omitempty"`

	// Repo is an HTTP(S) chart repository URL (with index.yaml).
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^https?://.+')`,message="must be an http:// or https:// URL"
	Repo string `json:"repo,omitempty"`

	// Name of the chart in repo.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`

	// Version (or semver range) of an oci or repo chart; the latest when
	// empty.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Version string `json:"version,omitempty"`
}

// ChartCredentials names a Secret used for chart URLs with a prefix.
type ChartCredentials struct {
	// URLPrefix the credentials are for, e.g. https://charts.example.com/
	// or oci://registry.example.com/team. It includes the host, so a
	// prefix never reaches another host.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^(https?|oci)://[^/]+')`,message="must be an http://, https:// or oci:// URL prefix including the host"
	URLPrefix string `json:"urlPrefix"`

	// SecretRef names a Secret in this namespace with username and
	// password keys, or of type kubernetes.io/dockerconfigjson.
	// +required
	SecretRef LocalObjectReference `json:"secretRef"`
}

// Patch changes rendered objects before they are applied.
//
// +kubebuilder:validation:XValidation:rule="has(self.target) || !self.patch.trim().startsWith('-')",message="a JSON6902 patch (a list of operations) needs target",fieldPath=".target"
type Patch struct {
	// Patch is YAML: a partial object, merged as a strategic-merge patch
	// (its apiVersion, kind, metadata.name and metadata.namespace select
	// the object unless target is set), or a list of JSON6902 operations
	// (op, path, value), which needs target. `$patch: delete` (with only
	// the fields that select) leaves the selected objects out, as in
	// kustomize: a CRD a chart renders as a template that another
	// environment's release already installed, say.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=3072
	Patch string `json:"patch"`

	// Target selects the objects patched; every field set must match.
	// +optional
	Target *PatchTarget `json:"target,omitempty"`
}

// PatchTarget selects rendered objects.
type PatchTarget struct {
	// Group of the kind; empty matches any group.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Group string `json:"group,omitempty"`
	// Version of the kind; empty matches any version.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Version string `json:"version,omitempty"`
	// Kind, e.g. Deployment.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind,omitempty"`
	// Name of the object, a regular expression matched whole.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// Namespace of the object, a regular expression matched whole.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
	// LabelSelector over the object's labels, e.g. app=web,tier!=db.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	LabelSelector string `json:"labelSelector,omitempty"`
}

// ValuesReference is a key of a ConfigMap or Secret holding Helm values.
type ValuesReference struct {
	// Kind of the object.
	// +required
	// +kubebuilder:validation:Enum=ConfigMap;Secret
	Kind string `json:"kind"`

	// Name of the object in this namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// Key holding a YAML values document.
	// +optional
	// +kubebuilder:default="values.yaml"
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key,omitempty"`

	// Optional skips a missing object or key instead of failing.
	// +optional
	Optional bool `json:"optional,omitempty"`
}

// ImageValue writes part of a built image's reference into a values path.
type ImageValue struct {
	// Image is the name of an image built by a component of this
	// environment.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Image string `json:"image"`

	// Path in the values, dot separated, e.g. validator.version.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$')`,message="must be a dot-separated values path such as image.tag"
	Path string `json:"path"`

	// From is the part written: Reference (repository@digest, the default),
	// Repository, Tag (the content tag), Digest, Revision (the tag made
	// from the source revision; the build pushes it before deploy),
	// Registry (the registry prefix nodes pull from, e.g.
	// 10.0.0.1:5000/team) or Name (the image's name in the spec), for
	// charts that take registry and image separately (repository +
	// image + version).
	// +optional
	// +kubebuilder:default=Reference
	// +kubebuilder:validation:Enum=Reference;Repository;Tag;Digest;Revision;Registry;Name
	From string `json:"from,omitempty"`
}

// ManifestsSpec applies Kubernetes objects from a source with server-side
// apply under devloop's field manager.
type ManifestsSpec struct {
	// Source holding the manifests.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Source string `json:"source"`

	// Paths of YAML files, directories of them, or kustomize directories,
	// relative to the source root. The root when empty.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=256
	// +kubebuilder:validation:items:XValidation:rule="!self.startsWith('/') && !self.matches('(^|/)[.][.](/|$)')",message="paths must be relative to the source root, without '..'"
	Paths []string `json:"paths,omitempty"`

	// Namespace for namespaced objects that name none; this namespace when
	// empty.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')`,message="must be lower-case letters, digits and '-', starting and ending with a letter or digit (a DNS-1123 label)"
	Namespace string `json:"namespace,omitempty"`

	// Adopt takes over objects the manifests name that exist already and
	// that this environment did not create (another environment's, or made
	// by hand): they are then this environment's, changed by it and
	// deleted with it. Without it such an object stops the component, naming
	// its owner: devloop never takes over, nor deletes, what it did not
	// create.
	// +optional
	Adopt bool `json:"adopt,omitempty"`

	// Patches change the objects read (after kustomize) before they are
	// applied. A patch that matches no object stops the component. At most
	// 16 patches in one environment.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	Patches []Patch `json:"patches,omitempty"`
}

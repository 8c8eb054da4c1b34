package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestTrigger says when a suite runs.
// +kubebuilder:validation:Enum=Manual;OnChange
type TestTrigger string

const (
	// TriggerManual runs the suite only when asked through the trigger
	// annotation.
	TriggerManual TestTrigger = "Manual"
	// TriggerOnChange also runs the suite after each rollout of the
	// components it depends on, once per distinct set of image digests.
	TriggerOnChange TestTrigger = "OnChange"
)

// TestSuite is a test run as a Job: `kubectl annotate devenv X
// trigger=<name>` starts it once.
type TestSuite struct {
	// Name identifies the suite in triggers and status. Unique across
	// components and tests. A DNS-1123 label.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')`,message="must be lower-case letters, digits and '-', starting and ending with a letter or digit (a DNS-1123 label)"
	Name string `json:"name"`

	// Labels group suites: `trigger=label:e2e` runs every suite labelled e2e.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:XValidation:rule=`self.matches(r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')`,message="must be lower-case letters, digits and '-', starting and ending with a letter or digit (a DNS-1123 label)"
	Labels []string `json:"labels,omitempty"`

	// Image the suite runs in.
	// +required
	Image TestImage `json:"image"`

	// Source mounted at /workspace, fetched by an init container.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Source string `json:"source,omitempty"`

	// Command run in /workspace. At most 96 command arguments in one
	// environment (run steps and test suites together).
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=512
	Command []string `json:"command"`

	// Env of the test container, e.g. E2E_FOCUS. At most 48 env entries
	// in one environment (images' env, run steps' env and test suites'
	// env together); envFrom takes the rest.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	Env []EnvVar `json:"env,omitempty"`

	// EnvFrom takes every key of ConfigMaps or Secrets in this namespace
	// as variables of the test container, for more variables than the
	// environment's env budget holds (a suite's whole configuration, say).
	// Env entries and params win over them. At most 16 envFrom entries in
	// one environment.
	// +optional
	// +kubebuilder:validation:MaxItems=4
	EnvFrom []EnvFromSource `json:"envFrom,omitempty"`

	// DependsOn names components that must be Ready, and suites that must
	// have passed, before this suite runs; until then it is Pending with the
	// reason.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=63
	DependsOn []string `json:"dependsOn,omitempty"`

	// Timeout of one run; the Job's activeDeadlineSeconds.
	// +optional
	// +kubebuilder:default="30m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$')`,message="must be a duration such as 30s, 5m or 1h30m"
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// Trigger is Manual (only on request) or OnChange (also after each
	// rollout of its dependencies).
	// +optional
	// +kubebuilder:default=Manual
	Trigger TestTrigger `json:"trigger,omitempty"`

	// Params are the env vars a trigger may set for one run, e.g.
	// E2E_FOCUS: `kubectl devloop trigger ENV SUITE --env E2E_FOCUS=Job`
	// (or the trigger annotation's parameter form). A param's default is
	// the suite's env entry of the same name, if any. A trigger setting a
	// variable not listed here is refused, naming the ones that are.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:XValidation:rule=`self.matches(r'^[A-Za-z_][A-Za-z0-9_]*$')`,message="must be an environment variable name: letters, digits and '_', not starting with a digit"
	Params []string `json:"params,omitempty"`

	// Cache is a persistent volume kept between runs of this suite, mounted
	// at /home/devloop/.cache: Go's build cache and, through GOMODCACHE
	// (which the suite's env may override), its module cache, so a second
	// `go test ./...` compiles only what changed.
	// +optional
	Cache *TestCache `json:"cache,omitempty"`

	// Report is a file the suite writes with per-test results; its counts
	// and the names of failed (and flaky) tests go into the run's status.
	// +optional
	Report *TestReport `json:"report,omitempty"`

	// ServiceAccountToken mounts the environment's ServiceAccount token
	// into the test pod, for suites that talk to the cluster (end-to-end
	// suites). Off by default: the suite's code, which the author
	// controls, gets no credentials it did not ask for.
	// +optional
	ServiceAccountToken bool `json:"serviceAccountToken,omitempty"`
}

// TestImage is an external image or one the environment builds; exactly
// one of ref and built.
//
// +kubebuilder:validation:XValidation:rule="has(self.ref) != has(self.built)",message="exactly one of ref or built must be set"
type TestImage struct {
	// Ref is an image reference, e.g. golang:1.25.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Ref string `json:"ref,omitempty"`

	// Built names an image built by a component; the run uses its digest.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Built string `json:"built,omitempty"`
}

// TestCache is a PersistentVolumeClaim kept between a suite's runs.
type TestCache struct {
	// Size of the claim.
	// +optional
	// +kubebuilder:default="5Gi"
	Size *resource.Quantity `json:"size,omitempty"`
}

// TestReportFormat is how a suite reports per-test results.
// +kubebuilder:validation:Enum=JUnit;GoTestJSON
type TestReportFormat string

const (
	// ReportJUnit is JUnit XML (go-junit-report, gotestsum, ginkgo
	// --junit-report).
	ReportJUnit TestReportFormat = "JUnit"
	// ReportGoTestJSON is `go test -json` output.
	ReportGoTestJSON TestReportFormat = "GoTestJSON"
)

// TestReport is a results file a suite writes.
type TestReport struct {
	// Path of the file, relative to /workspace, e.g. report.xml.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.matches('(^|/)[.][.](/|$)')",message="path must be relative to /workspace, without '..'"
	Path string `json:"path"`

	// Format of the file.
	// +required
	Format TestReportFormat `json:"format"`
}

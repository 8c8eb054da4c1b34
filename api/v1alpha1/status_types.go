package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DevEnvironmentStatus is what the operator observed and did. It follows
// kstatus: Ready is always present; Reconciling and Stalled say whether work
// is under way or cannot go on; observedGeneration says which spec they are
// about. Every string and list has a bound in the schema; free text is cut
// to it by Bound before each write (status_bounds.go).
type DevEnvironmentStatus struct {
	// ObservedGeneration is the spec generation this status describes;
	// 0 until the operator first reconciles the environment.
	// +optional
	// +kubebuilder:default=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready, Reconciling, Stalled (kstatus); TriggerHandled once
	// a trigger annotation was handled.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self.all(c, size(c.type) <= 64 && size(c.reason) <= 128 && size(c.message) <= 1024)",message="conditions: type at most 64 characters, reason 128, message 1024 (metav1.Condition allows 32768: devloop's status keeps to less)"
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Sources: the resolved revision and digest of each source.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	Sources []SourceStatus `json:"sources,omitempty"`

	// Components: phase, images and release of each component. The lists
	// that grow with the cluster have a total per environment
	// (status_totals.go), as the spec's lists do.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="self.map(c, has(c.images) ? size(c.images) : 0).sum() <= 16",message="at most 16 images (components[].images) in one environment's status, as in its spec"
	// +kubebuilder:validation:XValidation:rule="self.map(c, has(c.inventory) ? size(c.inventory) : 0).sum() <= 256",message="at most 256 objects (components[].inventory) in one environment's status"
	// +kubebuilder:validation:XValidation:rule="self.map(c, has(c.inventory) ? c.inventory.map(r, (has(r.group) ? size(r.group) : 0) + (has(r.version) ? size(r.version) : 0) + size(r.kind) + (has(r.namespace) ? size(r.namespace) : 0) + size(r.name)).sum() : 0).sum() <= 24576",message="at most 24576 characters of object names (components[].inventory: group, version, kind, namespace and name) in one environment's status"
	// +kubebuilder:validation:XValidation:rule="self.map(c, has(c.release) && has(c.release.workloads) ? size(c.release.workloads) : 0).sum() <= 64",message="at most 64 workloads (components[].release.workloads) in one environment's status"
	// +kubebuilder:validation:XValidation:rule="self.map(c, has(c.release) && has(c.release.workloads) ? c.release.workloads.map(r, (has(r.group) ? size(r.group) : 0) + (has(r.version) ? size(r.version) : 0) + size(r.kind) + (has(r.namespace) ? size(r.namespace) : 0) + size(r.name)).sum() : 0).sum() <= 8192",message="at most 8192 characters of workload names (components[].release.workloads) in one environment's status"
	// +kubebuilder:validation:XValidation:rule="self.map(c, has(c.message) ? size(c.message) : 0).sum() <= 16384",message="at most 16384 characters of messages (components[].message) in one environment's status"
	// +kubebuilder:validation:XValidation:rule="self.map(c, has(c.waitingFor) ? size(c.waitingFor) : 0).sum() <= 64",message="at most 64 waitingFor entries (components[].waitingFor) in one environment's status"
	// +kubebuilder:validation:XValidation:rule="self.map(c, has(c.drift) ? size(c.drift) : 0).sum() <= 16",message="at most 16 drift lines (components[].drift) in one environment's status"
	Components []ComponentStatus `json:"components,omitempty"`

	// Tests: the recent runs of each suite. The history has a total per
	// environment (status_totals.go): the oldest finished runs go first.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="self.map(t, has(t.runs) ? size(t.runs) : 0).sum() <= 32",message="at most 32 test runs (tests[].runs) in one environment's status"
	// +kubebuilder:validation:XValidation:rule="self.map(t, has(t.runs) ? t.runs.map(r, has(r.logTail) ? size(r.logTail) : 0).sum() : 0).sum() <= 16384",message="at most 16384 characters of log tails (tests[].runs[].logTail) in one environment's status"
	// +kubebuilder:validation:XValidation:rule="self.map(t, has(t.runs) ? t.runs.map(r, has(r.results) ? (has(r.results.failures) ? size(r.results.failures) : 0) + (has(r.results.flaky) ? size(r.results.flaky) : 0) : 0).sum() : 0).sum() <= 32",message="at most 32 test names (tests[].runs[].results.failures and flaky) in one environment's status"
	// +kubebuilder:validation:XValidation:rule="self.map(t, has(t.runs) ? t.runs.map(r, has(r.images) ? size(r.images) : 0).sum() : 0).sum() <= 96",message="at most 96 images under test (tests[].runs[].images) in one environment's status"
	// +kubebuilder:validation:XValidation:rule="self.map(t, has(t.runs) ? t.runs.map(r, has(r.params) ? size(r.params) : 0).sum() : 0).sum() <= 32",message="at most 32 params (tests[].runs[].params) in one environment's status"
	Tests []TestStatus `json:"tests,omitempty"`

	// Summary is Ready's message in one short sentence, for `kubectl get`.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Summary string `json:"summary,omitempty"`

	// ComponentsReady is "<ready>/<total>", for `kubectl get`.
	// +optional
	// +kubebuilder:validation:MaxLength=16
	ComponentsReady string `json:"componentsReady,omitempty"`

	// LastTestResult is "<suite>: <result>" of the latest finished run, for
	// `kubectl get`.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	LastTestResult string `json:"lastTestResult,omitempty"`

	// LastHandledTrigger is the last trigger annotation value acted upon;
	// token triggers (suite@token) are handled once per token.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	LastHandledTrigger string `json:"lastHandledTrigger,omitempty"`

	// LastHandledTriggerID identifies the last trigger request recorded:
	// the operator moves a `trigger` annotation into
	// devloop.dev/trigger-pending under this id (the resourceVersion it was
	// seen at), records its runs here, then removes the pending annotation.
	// A pending id already recorded is only removed, so a crash between
	// those writes neither loses nor repeats a request.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	LastHandledTriggerID string `json:"lastHandledTriggerID,omitempty"`

	// HandledTriggerTokens are the token triggers handled, per annotation
	// key its latest value ("trigger=unit-tests@v2") and, in one more
	// entry, up to 15 earlier ones as short hashes, newest first
	// ("trigger#<16 hex digits of SHA-256>,..."): a token value left in
	// place (by GitOps), or applied again after a newer one, is not
	// handled again.
	// +optional
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:items:MaxLength=1100
	HandledTriggerTokens []string `json:"handledTriggerTokens,omitempty"`

	// LastHandledReconcileAt is the value of the devloop.dev/reconcile-requested-at
	// annotation the last reconcile acted on: a tool that sets the annotation
	// (`kubectl devloop push`) waits for it to come back here.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	LastHandledReconcileAt string `json:"lastHandledReconcileAt,omitempty"`
	// DeletionFailures counts the attempts, since the environment was
	// deleted, that could not remove what it deployed; at the operator's
	// limit the rest is abandoned with a Warning event.
	// +optional
	DeletionFailures int32 `json:"deletionFailures,omitempty"`
}

// SourceStatus is the resolved state of a source.
type SourceStatus struct {
	// Name of the source.
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// Revision resolved, e.g. main@sha1:<commit> or <tag>@sha256:<digest>.
	// A Flux artifact's revision is cut to the bound.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Revision string `json:"revision,omitempty"`
	// Digest of the fetched content.
	// +optional
	// +kubebuilder:validation:MaxLength=80
	Digest string `json:"digest,omitempty"`
	// LastFetchTime is when the content was last fetched.
	// +optional
	LastFetchTime *metav1.Time `json:"lastFetchTime,omitempty"`
	// LastResolveTime is when the reference (branch, tag) last resolved to
	// new content, or was resolved for a new spec or a reconcile request.
	// It is resolved again after the source's interval; the same answer
	// then is not written, so an idle environment's status stays as it is.
	// +optional
	LastResolveTime *metav1.Time `json:"lastResolveTime,omitempty"`
}

// ComponentPhase is where a component is in its lifecycle.
// +kubebuilder:validation:Enum=Pending;Blocked;Building;Deploying;Ready;Failed;Disabled
type ComponentPhase string

// Component phases.
const (
	PhasePending   ComponentPhase = "Pending"
	PhaseBlocked   ComponentPhase = "Blocked"
	PhaseBuilding  ComponentPhase = "Building"
	PhaseDeploying ComponentPhase = "Deploying"
	PhaseReady     ComponentPhase = "Ready"
	PhaseFailed    ComponentPhase = "Failed"
	// PhaseDisabled is a component turned off (enabled: false) or an
	// on-demand one that is not up: nothing of it is deployed.
	PhaseDisabled ComponentPhase = "Disabled"
)

// ComponentStatus is the observed state of a component.
type ComponentStatus struct {
	// Name of the component.
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// Phase of the component.
	// +optional
	Phase ComponentPhase `json:"phase,omitempty"`
	// Message says why the component is in its phase, e.g. what it waits
	// for; cut to MaxComponentMessage.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
	// WaitingFor lists the dependencies that are not Ready yet (explicit
	// and implicit: any other component).
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=63
	WaitingFor []string `json:"waitingFor,omitempty"`
	// Images built for the component, one per images[] entry of its spec.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	Images []ImageStatus `json:"images,omitempty"`
	// Release is the Helm release of the component.
	// +optional
	Release *ReleaseStatus `json:"release,omitempty"`
	// Inventory lists the objects the component's manifests applied, so
	// objects that leave the set are pruned and deletion removes them all.
	// A Helm release keeps its own inventory (the release manifest).
	// +optional
	// +kubebuilder:validation:MaxItems=256
	Inventory []ObjectRef `json:"inventory,omitempty"`
	// AppliedDigest is the sha256 of the manifests last applied (rendered,
	// images pinned). Drift is only looked for while the objects to apply
	// are these same ones: a changed source is an update, not drift.
	// +optional
	// +kubebuilder:validation:MaxLength=80
	AppliedDigest string `json:"appliedDigest,omitempty"`
	// Drift is what was changed by hand since the last apply, corrected by
	// this reconcile: one line per object, e.g. "deployments.apps/web:
	// spec.replicas changed by hand". Empty when nothing had drifted.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=256
	Drift []string `json:"drift,omitempty"`
}

// ObjectRef names one applied object.
type ObjectRef struct {
	// Group of the object's kind; empty for the core group.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Group string `json:"group,omitempty"`
	// Version of the object's kind as applied.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Version string `json:"version,omitempty"`
	// Kind of the object.
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// Namespace of a namespaced object.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
	// Name of the object.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// ImageStatus is the last image built and pushed.
type ImageStatus struct {
	// Name of the image in the spec.
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// Repository the image was pushed to: registry.prefix (at most 200)
	// and the image's name.
	// +optional
	// +kubebuilder:validation:MaxLength=300
	Repository string `json:"repository,omitempty"`
	// Digest of the image (or index).
	// +optional
	// +kubebuilder:validation:MaxLength=80
	Digest string `json:"digest,omitempty"`
	// ContentHash of the image's inputs; unchanged inputs build nothing.
	// +optional
	// +kubebuilder:validation:MaxLength=80
	ContentHash string `json:"contentHash,omitempty"`
	// Tags pushed, all naming Digest.
	// +optional
	// +kubebuilder:validation:MaxItems=9
	// +kubebuilder:validation:items:MaxLength=128
	Tags []string `json:"tags,omitempty"`
	// Inputs is the hash of what Digest was built from: the source's
	// content, the base image's digest, the run step, the layers and the
	// config. The same inputs build and push nothing.
	// +optional
	// +kubebuilder:validation:MaxLength=80
	Inputs string `json:"inputs,omitempty"`
	// Revision of the source the image was built from.
	// +optional
	// +kubebuilder:validation:MaxLength=300
	Revision string `json:"revision,omitempty"`
	// RevisionTag is the tag rendered from the source revision the image
	// was built from (the first tag template using .Revision or
	// .ShortRevision): what imageValues with from: Revision write. An image
	// scoped by paths keeps it until its own paths change.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	RevisionTag string `json:"revisionTag,omitempty"`
	// Debug is true when Digest is a debug build (the image is listed in
	// the devloop.dev/debug annotation): optimizations off, delve at /dlv,
	// the containers running it started under delve on port 40000.
	// +optional
	Debug bool `json:"debug,omitempty"`
	// Build is the last builder Job of an image with a run step.
	// +optional
	Build *BuildStatus `json:"build,omitempty"`
	// Outputs are the run step's outputs pushed with Digest.
	// +optional
	// +kubebuilder:validation:MaxItems=4
	Outputs []OutputStatus `json:"outputs,omitempty"`
	// TemplateDigest is the digest the workloads' pod templates run, as
	// last deployed. It differs from Digest while a live update serves
	// Digest in place.
	// +optional
	// +kubebuilder:validation:MaxLength=80
	TemplateDigest string `json:"templateDigest,omitempty"`
	// LiveDigest is the digest whose files a live update synced into the
	// running pods (images[].liveUpdate); empty once a rollout made the
	// templates run Digest.
	// +optional
	// +kubebuilder:validation:MaxLength=80
	LiveDigest string `json:"liveDigest,omitempty"`
	// LastUpdate is how Digest reached the pods: LiveUpdate (synced in
	// place) or Rollout.
	// +optional
	LastUpdate ImageUpdate `json:"lastUpdate,omitempty"`
	// UpdateReason says why Digest was rolled out rather than live
	// updated (a path outside liveUpdate.paths, the image config, a sync
	// that failed on a pod), or what a live update reached.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	UpdateReason string `json:"updateReason,omitempty"`
}

// OutputStatus is a run step's output as pushed: an OCI artifact holding
// the directory as one tar layer, like what kubectl devloop push writes.
type OutputStatus struct {
	// Name of the output.
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// Repository the artifact was pushed to.
	// +kubebuilder:validation:MaxLength=300
	Repository string `json:"repository"`
	// Digest of the artifact's manifest.
	// +kubebuilder:validation:MaxLength=80
	Digest string `json:"digest"`
}

// BuildResult is the outcome of a builder Job.
// +kubebuilder:validation:Enum=Running;Succeeded;Failed
type BuildResult string

const (
	BuildRunning   BuildResult = "Running"
	BuildSucceeded BuildResult = "Succeeded"
	BuildFailed    BuildResult = "Failed"
)

// BuildStatus is the last builder Job of an image: which inputs it ran for
// and how it ended. Its logs stay readable with `kubectl logs job/<job>`
// until the next build of the image replaces the Job.
type BuildStatus struct {
	// Job is the builder Job's name, in the environment's namespace, or
	// the warm builder pod's (run.keepWarm), whose build container's log
	// holds the build's output from StartTime on.
	// +kubebuilder:validation:MaxLength=63
	Job string `json:"job"`
	// Result of the Job.
	Result BuildResult `json:"result"`
	// ExitCode of the builder command when it failed.
	// +optional
	ExitCode *int32 `json:"exitCode,omitempty"`
	// LogTail is the end of the build's output: brought up to date while
	// it runs, and as it failed; at most MaxBuildLogTail bytes.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	LogTail string `json:"logTail,omitempty"`
	// StartTime and CompletionTime of the Job.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
}

// ReleaseStatus is the state of a Helm release.
type ReleaseStatus struct {
	// Name of the release.
	// +kubebuilder:validation:MaxLength=53
	Name string `json:"name"`
	// Namespace of the release.
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// Revision of the release.
	// +optional
	Revision int `json:"revision,omitempty"`
	// Status of the release as Helm reports it, e.g. deployed or
	// pending-upgrade.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Status string `json:"status,omitempty"`
	// Failures counts the reconciles in a row that failed to bring the
	// release to the same chart and values; at the operator's limit the
	// environment stalls. Kept in status so a restarted operator does not
	// retry a failing release from zero.
	// +optional
	Failures int `json:"failures,omitempty"`
	// FailedDigest identifies the chart and values that failed; a change
	// of either starts the count again.
	// +optional
	// +kubebuilder:validation:MaxLength=80
	FailedDigest string `json:"failedDigest,omitempty"`
	// Workloads are the release's objects that run pods (Deployments,
	// StatefulSets, DaemonSets, ReplicaSets, Jobs, Pods), so clients such
	// as `kubectl devloop logs` find its pods without reading Helm's
	// storage.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Workloads []ObjectRef `json:"workloads,omitempty"`
	// MoreWorkloads counts the release's workloads left out of Workloads:
	// the environment's status holds at most MaxWorkloads of them.
	// +optional
	MoreWorkloads int32 `json:"moreWorkloads,omitempty"`
}

// TestResult is the outcome of a test run.
// +kubebuilder:validation:Enum=Pending;Running;Passed;Failed;TimedOut;Cancelled;Error
type TestResult string

// Test results.
const (
	ResultPending   TestResult = "Pending"
	ResultRunning   TestResult = "Running"
	ResultPassed    TestResult = "Passed"
	ResultFailed    TestResult = "Failed"
	ResultTimedOut  TestResult = "TimedOut"
	ResultCancelled TestResult = "Cancelled"
	ResultError     TestResult = "Error"
)

// TestStatus is the state of a test suite.
type TestStatus struct {
	// Name of the suite.
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// Message says why the suite waits, if it does; cut to
	// MaxTestMessage.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Message string `json:"message,omitempty"`
	// DigestSet is the hash of the image digests of the components an
	// OnChange suite depends on when it last ran: the suite runs again only
	// for a set it has not run for.
	// +optional
	// +kubebuilder:validation:MaxLength=80
	DigestSet string `json:"digestSet,omitempty"`
	// Runs are the most recent runs, newest first: historyLimit of them,
	// and more only while unfinished runs (one running, one queued) exceed
	// it; fewer once the environment holds MaxRuns (the oldest finished
	// runs of any suite are dropped first).
	// +optional
	// +kubebuilder:validation:MaxItems=10
	Runs []TestRun `json:"runs,omitempty"`
}

// TestRun is one run of a test suite.
type TestRun struct {
	// Number of the run, counting from 1 per suite.
	Number int64 `json:"number"`
	// Trigger that started the run (the annotation value, or OnChange),
	// cut to MaxRunTrigger.
	// +optional
	// +kubebuilder:validation:MaxLength=300
	Trigger string `json:"trigger,omitempty"`
	// Result of the run.
	// +optional
	Result TestResult `json:"result,omitempty"`
	// StartTime of the run.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// CompletionTime of the run.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// ExitCode of the test container.
	// +optional
	ExitCode *int32 `json:"exitCode,omitempty"`
	// JobName of the run's Job.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	JobName string `json:"jobName,omitempty"`
	// Images under test, name to digest.
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 63 && size(self[k]) <= 80)",message="images maps image names (at most 63 characters) to digests (at most 80)"
	Images map[string]string `json:"images,omitempty"`
	// LogTail is the end of the test container's log, at most 4 KiB for
	// the newest runs and shorter for older ones, so status stays small.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	LogTail string `json:"logTail,omitempty"`
	// Message says why the run ended as it did when the log does not (it
	// could not start, it was cancelled) or what a queued run, or one whose
	// pod cannot be placed, waits for; cut to MaxRunMessage.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Message string `json:"message,omitempty"`
	// Requests is how many trigger requests this run answers: requests for
	// a suite that already has a queued run join that run.
	// +optional
	Requests int32 `json:"requests,omitempty"`
	// Params are the env vars the run's trigger set (the suite's params).
	// +optional
	// +kubebuilder:validation:MaxItems=8
	Params []EnvVar `json:"params,omitempty"`
	// Results are the per-test results of the suite's report.
	// +optional
	Results *TestResults `json:"results,omitempty"`
}

// TestResults are counts and names from a run's report.
type TestResults struct {
	// Passed, Failed and Skipped count tests.
	Passed  int32 `json:"passed"`
	Failed  int32 `json:"failed"`
	Skipped int32 `json:"skipped"`
	// Failures names failed tests, the first 16.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=256
	Failures []string `json:"failures,omitempty"`
	// Flaky names tests that failed here and passed in another run on the
	// same image digests (or the reverse), the first 16.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=256
	Flaky []string `json:"flaky,omitempty"`
}

// Finished reports whether a run has ended.
func (r TestResult) Finished() bool {
	switch r {
	case ResultPassed, ResultFailed, ResultTimedOut, ResultCancelled, ResultError:
		return true
	}
	return false
}

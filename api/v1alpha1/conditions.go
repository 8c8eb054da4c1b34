package v1alpha1

// Condition types, following kstatus: Ready is always present and is the
// summary; Reconciling is True while work is under way; Stalled is True when
// work cannot go on without a change to the spec or the cluster. Reconciling
// and Stalled are never True together.
const (
	ConditionReady       = "Ready"
	ConditionReconciling = "Reconciling"
	ConditionStalled     = "Stalled"

	// ConditionTriggerHandled says how the last trigger annotation was
	// handled: True when it started or cancelled runs, False (reason
	// UnknownTestSuite or InvalidTrigger) when it named nothing runnable.
	// It never changes Ready: a typo in a trigger is not an environment
	// failure.
	ConditionTriggerHandled = "TriggerHandled"
)

// ConditionOwners names, for each condition type devloop writes, the one
// package that sets and removes it, as source-controller lists a
// reconciler's owned conditions. Two writers of one condition undo each
// other's work; test/layout fails when any other package writes one.
var ConditionOwners = map[string]string{
	// The kstatus conditions are summarized once, at the end of a
	// reconcile (controllers/status.go), and written early as progress.
	ConditionReady:       "controllers",
	ConditionReconciling: "controllers",
	ConditionStalled:     "controllers",
	// How the test run engine handled the last trigger annotation: its
	// own answer to the one who wrote it, never part of Ready (a typo in
	// a trigger is not an environment failure), so summarize leaves it be.
	ConditionTriggerHandled: "internal/testrun",
}

// Condition reasons.
const (
	ReasonSucceeded          = "Succeeded"
	ReasonProgressing        = "Progressing"
	ReasonSuspended          = "Suspended"
	ReasonDependencyCycle    = "DependencyCycle"
	ReasonInvalidSpec        = "InvalidSpec"
	ReasonWaiting            = "Waiting"
	ReasonReconcileError     = "ReconcileError"
	ReasonDeletionInProgress = "DeletionInProgress"
	// ReasonSourceFailed: a source cannot be resolved or fetched as the spec
	// says (unknown branch, denied, digest mismatch, unsafe archive).
	ReasonSourceFailed = "SourceFailed"
	// ReasonBuildFailed: an image cannot be built as the spec says (unknown
	// base, denied push, missing layer path, failed build command).
	ReasonBuildFailed = "BuildFailed"
	// ReasonBuilding: a builder Job is running.
	ReasonBuilding = "Building"

	// ReasonDeployFailed: a component's objects or release cannot be
	// deployed (forbidden, invalid, a Helm release that failed too often).
	ReasonDeployFailed = "DeployFailed"
	// ReasonNoServiceAccount: there is no identity to deploy as.
	ReasonNoServiceAccount = "NoServiceAccount"
	// ReasonForbidden: the environment's ServiceAccount may not do what
	// the environment asks of the operator outside a deploy (create a
	// builder Job, read a Secret the spec names).
	ReasonForbidden = "Forbidden"

	// ReasonDeletionBlocked: the environment is being deleted and
	// something it deployed cannot be removed (the ServiceAccount may not);
	// it is tried again, then abandoned (ReasonDeletionAbandoned, a
	// Warning event naming what may be left).
	ReasonDeletionBlocked   = "DeletionBlocked"
	ReasonDeletionAbandoned = "DeletionAbandoned"

	// ReasonTagMoved (a Warning event): a push moved a tag that named a
	// digest this environment had not pushed: another environment (or
	// someone else) pushes to the same repository.
	ReasonTagMoved = "TagMoved"

	// ReasonDriftCorrected (a Warning event): objects a component deployed
	// were changed by hand and the reconcile applied them back.
	ReasonDriftCorrected = "DriftCorrected"

	// Test run reasons, of the TriggerHandled condition and of events.
	ReasonTriggerAccepted  = "TriggerAccepted"
	ReasonUnknownTestSuite = "UnknownTestSuite"
	ReasonInvalidTrigger   = "InvalidTrigger"
	// ReasonTokenAlreadyHandled (a Normal event): a token trigger value
	// handled before was applied again (a GitOps revert); it is not run
	// again.
	ReasonTokenAlreadyHandled = "TokenAlreadyHandled"
	ReasonTestStarted         = "TestStarted"
	ReasonTestPassed          = "TestPassed"
	ReasonTestFailed          = "TestFailed"
	ReasonTestCancelled       = "TestCancelled"
)

// Finalizer keeps a DevEnvironment until what it deployed is removed.
const Finalizer = "devloop.dev/finalizer"

// Annotations read by the operator.
const (
	// TriggerAnnotation starts test suites: a name, a comma list, "all",
	// "label:<label>", or a token form "<suites>@<token>".
	TriggerAnnotation = "trigger"
	// TriggerAnnotationPrefixed is the same, for tools that want a prefixed
	// key.
	TriggerAnnotationPrefixed = "devloop.dev/trigger"
	// TriggerPendingAnnotation holds a trigger the operator has taken from
	// TriggerAnnotation(Prefixed) and not yet finished recording; only the
	// operator writes it.
	TriggerPendingAnnotation = "devloop.dev/trigger-pending"
	// ReconcileRequestAnnotation asks for an immediate reconcile (what
	// `kubectl devloop push` sets); any new value does.
	ReconcileRequestAnnotation = "devloop.dev/reconcile-requested-at"
	// AbandonOnDeleteAnnotation ("true") lets a deletion that cannot
	// remove what the environment deployed finish at once, leaving it.
	AbandonOnDeleteAnnotation = "devloop.dev/abandon-on-delete"
)

// HistoryLimitOrDefault is the number of test runs kept per suite.
func (s *DevEnvironmentSpec) HistoryLimitOrDefault() int {
	if s.HistoryLimit == nil || *s.HistoryLimit < 1 {
		return 5
	}
	return int(*s.HistoryLimit)
}

// PathsOrDefault is where the build cache is mounted: the spec's paths, or
// Go's build cache under the builder's HOME and the module cache of a
// golang image. Nil-safe, so a build
// without a cache mounts the same paths as emptyDirs.
func (c *BuildCache) PathsOrDefault() []string {
	if c == nil || len(c.Paths) == 0 {
		return []string{BuilderHome + "/.cache", "/go/pkg/mod"}
	}
	return c.Paths
}

// BuilderHome is HOME in builder containers. Not /root: the build runs as
// a non-root user, and /root is mode 0700 in most images.
const BuilderHome = "/home/devloop"

package testrun

import (
	"context"
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/engine"
	"github.com/devloop-dev/devloop/internal/identity"
	"github.com/devloop-dev/devloop/internal/message"
	"github.com/devloop-dev/devloop/internal/plan"
	"github.com/devloop-dev/devloop/internal/pods"
)

// DefaultStartTimeout is how long a test pod may wait with an image
// that cannot be pulled (or a container that cannot be created) before its
// run ends with Error.
const DefaultStartTimeout = 2 * time.Minute

// testPass is one reconcile's work on the test suites, in three phases:
// decide in memory (record trigger requests and OnChange runs, finish runs
// whose Jobs ended, start queued runs whose dependencies are met, trim
// history), commit the result to status with an optimistic lock, then act
// (create and delete Jobs, remove the pending trigger, emit events and
// metrics). Nothing touches a Job before the commit: a reconcile working
// from a stale cache fails to commit and changes nothing, so no run is
// started twice, and none is lost by an older status overwriting a newer.
type testPass struct {
	e      *Engine
	env    *v1alpha1.DevEnvironment
	before *v1alpha1.DevEnvironment
	plan   *plan.Plan
	in     engine.Request
	now    time.Time
	next   engine.Result

	// jobs are the environment's test Jobs by name, from the cache.
	jobs map[string]*batchv1.Job

	creates    []*batchv1.Job
	deletes    []string
	pendingRaw string
	// notes are events and metrics of finished runs, emitted once the
	// runs are committed.
	notes []func()
}

func (e *Engine) startTimeout() time.Duration {
	if e.StartTimeout > 0 {
		return e.StartTimeout
	}
	return DefaultStartTimeout
}

// Reconcile is the tests step of one reconcile (the engine contract):
// see testPass. Status it owns is written by in.Env's own locked patch;
// the result says when to look again.
func (e *Engine) Reconcile(ctx context.Context, in engine.Request) (engine.Result, error) {
	if in.Plan == nil {
		return engine.Result{}, nil
	}
	p := &testPass{e: e, env: in.Env, before: in.Before, plan: in.Plan, in: in, now: time.Now()}
	for _, name := range in.Plan.Order {
		if _, ok := in.Plan.Tests[name]; ok {
			p.testStatus(name)
		}
	}
	if err := p.listJobs(ctx); err != nil {
		return p.next, err
	}
	p.takePending(ctx)
	p.takeTokens()
	p.enqueueOnChange()
	for i := range p.env.Spec.Tests {
		if err := p.advance(ctx, &p.env.Spec.Tests[i]); err != nil {
			return p.next, err
		}
	}
	p.trimHistory()
	if p.needsCommit() {
		if err := p.commit(ctx); err != nil {
			p.restore()
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				p.next.RetrySoon()
				return p.next, nil
			}
			return p.next, fmt.Errorf("recording test runs: %w", err)
		}
	}
	return p.next, p.act(ctx)
}

// testStatus returns the status entry of a suite, adding it when missing.
func (p *testPass) testStatus(name string) *v1alpha1.TestStatus {
	if st := p.env.Status.Test(name); st != nil {
		return st
	}
	p.env.Status.Tests = append(p.env.Status.Tests, v1alpha1.TestStatus{Name: name})
	return &p.env.Status.Tests[len(p.env.Status.Tests)-1]
}

// wrote notes that env was written and holds the version written (see
// engine.Request.Before).
func (p *testPass) wrote() { p.before.ResourceVersion = p.env.ResourceVersion }

func (p *testPass) listJobs(ctx context.Context) error {
	env := p.env
	list := &batchv1.JobList{}
	if err := p.e.Client.List(ctx, list, client.InNamespace(env.Namespace),
		client.MatchingLabels{v1alpha1.LabelEnvironment: v1alpha1.LabelValue(env.Name), v1alpha1.LabelRole: v1alpha1.RoleTest}); err != nil {
		return fmt.Errorf("listing test jobs: %w", err)
	}
	p.jobs = map[string]*batchv1.Job{}
	for i := range list.Items {
		if metav1.IsControlledBy(&list.Items[i], env) {
			p.jobs[list.Items[i].Name] = &list.Items[i]
		}
	}
	return nil
}

// takePending records the pending trigger (step 2 of the annotation
// protocol in triggers.go) unless status already holds its id.
func (p *testPass) takePending(ctx context.Context) {
	env := p.env
	pt, raw, ok, err := ReadPending(env)
	if !ok {
		return
	}
	p.pendingRaw = raw
	if err != nil {
		log.FromContext(ctx).Info("dropping an unreadable pending trigger", "value", raw)
		p.event(corev1.EventTypeWarning, v1alpha1.ReasonInvalidTrigger, "Trigger", err.Error())
		return
	}
	if env.Status.LastHandledTriggerID == pt.ID {
		return
	}
	p.applyTrigger(pt.Key, pt.Value)
	env.Status.LastHandledTriggerID = pt.ID
}

// takeTokens handles token triggers not handled yet; they stay in place.
// A token handled before (one of the key's last MaxTokens) is never run
// again: when it comes back (a revert to an older token) it becomes the
// key's latest, with an event saying it was not run, once.
func (p *testPass) takeTokens() {
	env := p.env
	for _, key := range TriggerKeys {
		v, ok := env.Annotations[key]
		if !ok || !IsToken(v) || TokenIsLatest(env, key, v) {
			continue
		}
		if TokenHandled(env, key, v) {
			RecordToken(env, key, v)
			note := message.Truncate(key+"="+v+": this token was handled before; nothing was started or cancelled (use a new token)", message.MaxEventNote)
			p.notes = append(p.notes, func() { p.event(corev1.EventTypeNormal, v1alpha1.ReasonTokenAlreadyHandled, "Trigger", note) })
			continue
		}
		p.applyTrigger(key, v)
		RecordToken(env, key, v)
	}
}

// enqueueOnChange queues a run of each OnChange suite whose component
// dependencies are all Ready with a set of image digests it has not run
// for yet.
func (p *testPass) enqueueOnChange() {
	env := p.env
	for i := range env.Spec.Tests {
		suite := &env.Spec.Tests[i]
		if suite.Trigger != v1alpha1.TriggerOnChange || len(p.componentsWaiting(suite)) > 0 {
			continue
		}
		set := DigestSet(imagesUnderTest(env, suite))
		st := p.testStatus(suite.Name)
		if st.DigestSet == set {
			continue
		}
		if !roomFor(env.Status.Tests, st, nil) {
			continue // the set is taken up once a run ends and makes room
		}
		st.DigestSet = set
		p.enqueue(suite.Name, "OnChange", nil)
	}
}

// enqueue adds a queued run, or joins the one already queued with the same
// params: a suite has at most one run waiting per parameter set, so
// requests arriving faster than runs finish cannot grow status without
// bound (and at most maxQueued parameter sets wait at once).
func (p *testPass) enqueue(suite, what string, params []v1alpha1.EnvVar) string {
	st := p.testStatus(suite)
	queued := 0
	for i := range st.Runs {
		if st.Runs[i].Result == v1alpha1.ResultPending {
			queued++
		}
		if st.Runs[i].Result == v1alpha1.ResultPending && SameParams(st.Runs[i].Params, params) {
			st.Runs[i].Requests++
			return fmt.Sprintf("%s #%d was already queued; it now answers %d requests", suite, st.Runs[i].Number, st.Runs[i].Requests)
		}
	}
	if queued >= maxQueued {
		return fmt.Sprintf("%s already has %d runs queued with other params; not queued again", suite, queued)
	}
	if full := QueueRoom(p.env.Status.Tests, params); full != "" {
		return fmt.Sprintf("%s not queued: %s", suite, full)
	}
	n := int64(1)
	for _, r := range st.Runs {
		n = max(n, r.Number+1)
	}
	st.Runs = append([]v1alpha1.TestRun{{Number: n, Trigger: message.Truncate(what, 300), Result: v1alpha1.ResultPending, Requests: 1, Params: params}}, st.Runs...)
	return fmt.Sprintf("%s #%d queued", suite, n)
}

// cancel ends a suite's running and queued runs.
func (p *testPass) cancel(suite, what string) string {
	st := p.testStatus(suite)
	var done []string
	for i := range st.Runs {
		run := &st.Runs[i]
		switch run.Result {
		case v1alpha1.ResultPending:
			run.Message = "cancelled by " + message.Truncate(what, 300) + " before it started"
		case v1alpha1.ResultRunning:
			run.Message = "cancelled by " + message.Truncate(what, 300)
			if run.JobName != "" {
				p.delete(run.JobName)
			}
		default:
			continue
		}
		run.Result = v1alpha1.ResultCancelled
		run.CompletionTime = &metav1.Time{Time: p.now}
		p.finished(suite, run)
		done = append(done, fmt.Sprintf("#%d", run.Number))
	}
	if len(done) == 0 {
		return suite + ": nothing running or queued to cancel"
	}
	return suite + " " + strings.Join(done, ", ") + " cancelled"
}

// advance moves a suite's runs along: a running run's Job is read and a
// finished one recorded; the queued run starts when nothing runs and its
// dependencies are met, or says what it waits for.
func (p *testPass) advance(ctx context.Context, suite *v1alpha1.TestSuite) error {
	st := p.testStatus(suite.Name)
	st.Message = ""
	var active, queued *v1alpha1.TestRun
	for i := range st.Runs {
		run := &st.Runs[i]
		switch run.Result {
		case v1alpha1.ResultRunning:
			if err := p.observe(ctx, suite, run); err != nil {
				return err
			}
			if run.Result == v1alpha1.ResultRunning {
				active = run
			}
		case v1alpha1.ResultPending:
			queued = run
		}
	}
	if active != nil && active.Message != "" {
		// A run that cannot start says why (strandedRunMessage).
		st.Message = message.Truncate(fmt.Sprintf("run #%d waits: %s", active.Number, active.Message), v1alpha1.MaxTestMessage)
	}
	if queued == nil {
		return nil
	}
	switch waits := p.waitingFor(suite); {
	case active != nil:
		queued.Message = fmt.Sprintf("queued behind run #%d", active.Number)
	case len(waits) > 0:
		queued.Message = "waiting for " + strings.Join(waits, ", ")
	default:
		busy, err := p.busyBuilder(ctx, suite)
		if err != nil {
			return err
		}
		if busy == "" {
			queued.Message = ""
			p.start(suite, queued)
			return nil
		}
		queued.Message = "waiting for " + busy
	}
	st.Message = fmt.Sprintf("run #%d is %s", queued.Number, queued.Message)
	return nil
}

// waitingFor lists what keeps a suite from starting: dependencies not
// Ready or not passed, a source not resolved, an image not built.
func (p *testPass) waitingFor(suite *v1alpha1.TestSuite) []string {
	waits := p.componentsWaiting(suite)
	for _, d := range suite.DependsOn {
		if _, ok := p.plan.Tests[d]; !ok {
			continue
		}
		dep := p.testStatus(d)
		switch {
		case len(dep.Runs) == 0:
			waits = append(waits, fmt.Sprintf("suite %s to pass (it has not run; trigger it)", d))
		case dep.Runs[0].Result != v1alpha1.ResultPassed:
			waits = append(waits, fmt.Sprintf("suite %s to pass (run #%d is %s)", d, dep.Runs[0].Number, dep.Runs[0].Result))
		}
	}
	if suite.Source != "" {
		if _, ok := p.in.Sources.Ref(suite.Source); !ok {
			waits = append(waits, "source "+suite.Source+" to be resolved")
		}
	}
	if b := suite.Image.Built; b != "" {
		if c, ist := p.env.BuiltImage(b); ist == nil || ist.Digest == "" {
			waits = append(waits, fmt.Sprintf("image %s of component %s to be built", b, componentName(c)))
		}
	}
	return waits
}

// componentsWaiting lists the suite's component dependencies that are not
// Ready.
func (p *testPass) componentsWaiting(suite *v1alpha1.TestSuite) []string {
	var waits []string
	for _, d := range suite.DependsOn {
		if _, ok := p.plan.Components[d]; !ok {
			continue
		}
		phase := v1alpha1.PhasePending
		if st := p.env.Status.Component(d); st != nil && st.Phase != "" {
			phase = st.Phase
		}
		if phase != v1alpha1.PhaseReady {
			waits = append(waits, fmt.Sprintf("component %s to be Ready (it is %s)", d, phase))
		}
	}
	return waits
}

// trimHistory keeps historyLimit runs per suite, and the history within
// the environment's totals (FitHistory), and marks for deletion every test
// Job no kept run names (dropped runs, suites gone from the spec) and
// every Job still active whose run has ended.
func (p *testPass) trimHistory() {
	env := p.env
	limit := env.Spec.HistoryLimitOrDefault()
	for i := range env.Status.Tests {
		st := &env.Status.Tests[i]
		st.Runs, _ = Trim(st.Runs, limit)
		ShrinkTails(st.Runs)
		ShrinkResults(st.Runs)
	}
	FitHistory(env.Status.Tests)
	kept := map[string]v1alpha1.TestResult{}
	for _, st := range env.Status.Tests {
		for _, r := range st.Runs {
			if r.JobName != "" {
				kept[r.JobName] = r.Result
			}
		}
	}
	for name, job := range p.jobs {
		result, ok := kept[name]
		if !ok || (result.Finished() && jobActive(job)) {
			p.delete(name)
		}
	}
}

func jobActive(job *batchv1.Job) bool {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return false
		}
	}
	return job.DeletionTimestamp.IsZero()
}

func (p *testPass) delete(job string) {
	for _, d := range p.deletes {
		if d == job {
			return
		}
	}
	p.deletes = append(p.deletes, job)
}

// testState is the part of status the tests step owns.
// Its fields are exported for equality.Semantic.
type testState struct {
	Tests     []v1alpha1.TestStatus
	Last, ID  string
	Tokens    []string
	Condition *metav1.Condition
}

func testStateOf(env *v1alpha1.DevEnvironment) testState {
	return testState{Tests: env.Status.Tests, Last: env.Status.LastHandledTrigger, ID: env.Status.LastHandledTriggerID,
		Tokens: env.Status.HandledTriggerTokens, Condition: meta.FindStatusCondition(env.Status.Conditions, v1alpha1.ConditionTriggerHandled)}
}

// needsCommit: status the tests step owns changed, or Jobs are to be
// touched (which only a committed, hence current, view may do).
func (p *testPass) needsCommit() bool {
	return len(p.creates) > 0 || len(p.deletes) > 0 ||
		!equality.Semantic.DeepEqual(testStateOf(p.env), testStateOf(p.before))
}

// commit writes status with an optimistic lock on the version this
// reconcile read (or the one takeTrigger wrote).
func (p *testPass) commit(ctx context.Context) error {
	// The printer column goes with the runs it summarizes.
	p.env.Status.LastTestResult = p.env.Status.LatestTestResult()
	p.env.Status.Bound() // free text cut to the schema's bounds, never refused
	base := p.before.DeepCopy()
	base.ResourceVersion = p.env.ResourceVersion
	if err := p.e.Client.Status().Patch(ctx, p.env, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return err
	}
	p.wrote()
	return nil
}

// restore puts back the test status the reconcile started from, so the
// final (unlocked) status patch does not write what failed to commit.
func (p *testPass) restore() {
	env, before := p.env, p.before.DeepCopy()
	env.Status.Tests = before.Status.Tests
	env.Status.LastHandledTrigger = before.Status.LastHandledTrigger
	env.Status.LastHandledTriggerID = before.Status.LastHandledTriggerID
	env.Status.HandledTriggerTokens = before.Status.HandledTriggerTokens
	env.Status.LastTestResult = before.Status.LastTestResult
	meta.RemoveStatusCondition(&env.Status.Conditions, v1alpha1.ConditionTriggerHandled)
	if c := meta.FindStatusCondition(before.Status.Conditions, v1alpha1.ConditionTriggerHandled); c != nil {
		env.Status.Conditions = append(env.Status.Conditions, *c)
	}
	p.creates, p.deletes, p.notes, p.pendingRaw = nil, nil, nil, ""
}

// act does what the committed status says: emits the finished runs'
// events and metrics, removes the recorded pending trigger, creates the
// started runs' Jobs and deletes the Jobs no longer wanted. What fails
// here is in status already and is retried by the next reconcile (a run
// marked Running whose Job is missing gets it created).
func (p *testPass) act(ctx context.Context) error {
	for _, n := range p.notes {
		n()
	}
	if p.pendingRaw != "" {
		if err := p.e.removePending(ctx, p.env, p.pendingRaw); err != nil {
			return fmt.Errorf("removing the recorded trigger: %w", err)
		}
	}
	if len(p.creates) == 0 && len(p.deletes) == 0 {
		return nil
	}
	cl, idErr := p.in.Tenant.Client()
	for _, job := range p.creates {
		if err := p.create(ctx, cl, idErr, job); err != nil {
			return err
		}
	}
	for _, name := range p.deletes {
		if idErr != nil {
			log.FromContext(ctx).Info("cannot delete test job: no identity", "job", name, "error", idErr.Error())
			continue
		}
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: p.env.Namespace, Name: name}}
		err := cl.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))
		if err != nil && !apierrors.IsNotFound(err) {
			// Written by the final status patch; the next reconcile
			// tries again.
			if job := p.jobs[name]; job != nil && p.plan.Tests[job.Labels[v1alpha1.LabelSuite]] != nil {
				st := p.testStatus(job.Labels[v1alpha1.LabelSuite])
				st.Message = message.Truncate("cannot delete job "+name+": "+err.Error(), message.MaxEventNote)
			}
			log.FromContext(ctx).Error(err, "deleting test job", "job", name)
		}
	}
	return nil
}

// Engine runs an environment's test suites as Jobs, end to end: the
// trigger annotation taken exactly once, queued runs gated on their
// dependencies, Jobs created as the environment's ServiceAccount, their
// outcome and log tail recorded, history trimmed. It is made once.
type Engine struct {
	// Client is the manager's: test Jobs are read from its cache, the
	// environment's annotations and status written through it.
	Client client.Client
	// APIReader reads Jobs the cache has not seen and test pods straight
	// from the API server.
	APIReader client.Reader
	// Events records run starts and ends; nil records nothing.
	Events events.EventRecorder
	// LogsFor, when set, gives the reader of an environment's test pod
	// logs acting as its tenant (pods.TenantLogs); Logs is used when it is nil
	// (tests without a kubelet). Logs nil as well leaves runs without a
	// tail.
	LogsFor func(t *identity.Tenant) (pods.LogReader, error)
	Logs    pods.LogReader
	// HelperImage fetches a suite's source in its pod.
	HelperImage string
	// StartTimeout is how long a test pod may wait to start (an image that
	// cannot be pulled) before its run ends with Error;
	// DefaultStartTimeout when zero.
	StartTimeout time.Duration
	// TeamCache is the operator's team build cache, nil when it runs none:
	// a suite on its images' build cache claim reaches it as their
	// builders do (withGoCacheProg).
	TeamCache *pods.TeamCacheService
}

// Finalize drops what the engine keeps of a deleted environment
// (req.Component nil): its metric series. Test Jobs go with their owner.
func (e *Engine) Finalize(_ context.Context, req engine.Request) error {
	if req.Component == nil {
		ForgetMetrics(req.Env.Namespace, req.Env.Name)
	}
	return nil
}

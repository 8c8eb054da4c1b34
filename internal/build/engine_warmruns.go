package build

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/message"
)

// Bounds of one build, in a builder Job or a warm builder: the spec's
// run.timeout (the CRD defaults it to DefaultBuildTimeout), at most the
// operator's Options.MaxBuildTimeout (DefaultMaxBuildTimeout when zero).
const (
	DefaultBuildTimeout    = 15 * time.Minute
	DefaultMaxBuildTimeout = 2 * time.Hour
)

// buildTimeout is how long one build of run may take.
func (e *Engine) buildTimeout(run *v1alpha1.BuildRun) time.Duration {
	return capTimeout(run, e.Options.MaxBuildTimeout)
}

// capTimeout is run's timeout, or the default, capped by max (or by
// DefaultMaxBuildTimeout when max is zero).
func capTimeout(run *v1alpha1.BuildRun, max time.Duration) time.Duration {
	if max <= 0 {
		max = DefaultMaxBuildTimeout
	}
	d := DefaultBuildTimeout
	if run != nil && run.Timeout != nil && run.Timeout.Duration > 0 {
		d = run.Timeout.Duration
	}
	return min(d, max)
}

// newBuildToken names one warm build across its steps.
func newBuildToken() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// execRefused reports an exec the API server refused (403): the
// connection upgrade fails with the server's Status, which the websocket
// executor wraps in an UpgradeFailureError.
func execRefused(err error) bool {
	if apierrors.IsForbidden(err) {
		return true
	}
	var upgrade *httpstream.UpgradeFailureError
	return errors.As(err, &upgrade) && apierrors.IsForbidden(upgrade.Cause)
}

// maxWarmRuns bounds the remembered runs; finished ones go first.
const maxWarmRuns = 256

// warmBuilds are the builds running in warm builders, outside any
// reconcile: an exec lasts as long as the compile, and a reconcile worker
// must not wait for it. Each is keyed by the pod's UID and the image's
// inputs, so a build runs once per pod and inputs; when it ends, its
// environment is reconciled (wake). A restarted operator has none and
// execs the build again; the helper's workspace lock makes the two take
// turns, and the second gives the same image.
type warmBuilds struct {
	mu   sync.Mutex
	runs map[string]*warmRun
	// pods serializes the builds in one pod: the steps of two builds
	// never interleave (the helper's lock and token cover a restart).
	pods map[string]*podTurn
	// lanes serialize the builds of images sharing a build cache claim
	// (lanes.go).
	lanes *lanes
	// handoffs are the lanes superseded builds hold for their successor
	// in the same pod (lanes_handoff.go), by pod.
	handoffs map[string]laneHandoff
	wake     chan event.GenericEvent
}

// podTurn is a pod's build lock and how many runs hold or wait for it.
type podTurn struct {
	mu    sync.Mutex
	users int
}

func newWarmBuilds() *warmBuilds {
	return &warmBuilds{runs: map[string]*warmRun{}, pods: map[string]*podTurn{}, lanes: newLanes(),
		handoffs: map[string]laneHandoff{}, wake: make(chan event.GenericEvent, 64)}
}

// turn waits for pod's builds before this one and returns its release.
func (w *warmBuilds) turn(pod string) func() {
	w.mu.Lock()
	t := w.pods[pod]
	if t == nil {
		t = &podTurn{}
		w.pods[pod] = t
	}
	t.users++
	w.mu.Unlock()
	t.mu.Lock()
	return func() {
		t.mu.Unlock()
		w.mu.Lock()
		if t.users--; t.users == 0 {
			delete(w.pods, pod)
		}
		w.mu.Unlock()
	}
}

// warmRun is one build.
type warmRun struct {
	pod string
	// builder (namespace/name of the pod), image and lane say whose build
	// it is, for builder Jobs of the lane (busyWarmBuild).
	builder, image, lane string
	// attempt counts the tries at the same inputs (a timed-out build is
	// tried again).
	attempt int
	// cancel ends the run's exec streams (a newer build of the pod
	// supersedes it; its processes are killed by the newer one's claim).
	cancel context.CancelFunc
	// superseded is set (under warmBuilds.mu) before cancel when a newer
	// build of the pod supersedes this one.
	superseded bool
	// started is the build's start as its claim tells (an adopted
	// build's is the original start); zero until the claim answers.
	started time.Time
	// log keeps the end of the steps' output (stderr) as it comes, for
	// status while the build runs.
	log *message.Tail
	// packages counts the packages the build compiled (progress.go).
	packages *packageCounter
	mu       sync.Mutex
	done     bool
	out      warmOutcome
	// queuedBehind is who holds the build's lane while it waits for it
	// ("" once it has it, or never waited).
	queuedBehind string
	queued       bool
}

// waitingForLane says whether the build waits for its lane, and behind
// whom.
func (r *warmRun) waitingForLane() (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.queuedBehind, r.queued
}

// liveTail is the end of the build's output so far.
func (r *warmRun) liveTail() string { return r.log.String() }

// warmOutcome is how a build ended: a report, or an error with the build
// command's exit code (nil when the exec itself failed) and its log tail.
type warmOutcome struct {
	report   AssembleReport
	err      error
	exitCode *int32
	logTail  string
	// timedOut is a build stopped at its timeout.
	timedOut bool
	timeout  time.Duration
	// ended is when the outcome was known.
	ended time.Time
	// step is the step that failed.
	step string
}

// startedAt is the build's start, zero until its claim answered.
func (r *warmRun) startedAt() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.started
}

func (r *warmRun) outcome() (warmOutcome, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out, r.done
}

func (r *warmRun) finished() bool {
	_, done := r.outcome()
	return done
}

func (w *warmBuilds) lookup(key string) *warmRun {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.runs[key]
}

// runningIn names the image and warm builder of an unfinished build in
// lane of an image other than image (false when none): started, queued
// for the lane, or running.
func (w *warmBuilds) runningIn(lane, image string) (string, string, bool) {
	if lane == "" {
		return "", "", false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range w.runs {
		if r.lane == lane && r.image != image && !r.finished() {
			return r.image, r.builder[strings.IndexByte(r.builder, '/')+1:], true
		}
	}
	return "", "", false
}

// sawEnd says whether this process ran builds in the warm builder
// namespace/pod and saw every one of them end: what status still says
// of them is older than that.
func (w *warmBuilds) sawEnd(namespace, pod string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	known := false
	for _, r := range w.runs {
		if r.builder != namespace+"/"+pod {
			continue
		}
		if !r.finished() {
			return false
		}
		known = true
	}
	return known
}

func (w *warmBuilds) forget(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.runs, key)
}

// warmPlan is what one build in a warm builder runs: the claim, then the
// steps of the build the claim goes on with (its token).
type warmPlan struct {
	claim   WarmStep
	steps   func(token string) ([]WarmStep, error)
	timeout time.Duration
	attempt int
	// lane is the build's lane (laneOf; "" for none), held from the
	// claim to the end by holder ("image X").
	lane, holder string
	// image is the image built, builder the pod's namespace/name.
	image, builder string
}

// claimTimeout bounds the claim step, which may wait for an earlier
// build's processes to be killed.
const claimTimeout = 2 * time.Minute

// warmGrace is how long after a build's timeout the operator stops
// waiting for it: the helper stops the command at the timeout itself and
// says so first. A tenth of the timeout, between 1 and 30 seconds.
func warmGrace(timeout time.Duration) time.Duration {
	return min(max(timeout/10, time.Second), 30*time.Second)
}

// start runs a build for key in the background, after the builds already
// running in the same pod; a build of other inputs still running there is
// superseded (its streams closed; the claim kills its processes). The
// claim comes first and says which build goes on (an earlier operator
// process's of the same inputs is adopted) and since when; then its steps,
// one after the other, through exec, until its timeout counted from that
// start. It reconciles env when the build ends. The last step's stdout
// carries the report.
func (w *warmBuilds) start(key, pod string, env *v1alpha1.DevEnvironment, plan warmPlan,
	exec func(ctx context.Context, step WarmStep, stdout, stderr io.Writer) error) *warmRun {
	ctx, cancel := context.WithCancel(context.Background())
	run := &warmRun{pod: pod, builder: plan.builder, image: plan.image, lane: plan.lane,
		attempt: plan.attempt, cancel: cancel, log: &message.Tail{Max: logTailBytes}, packages: &packageCounter{}}
	w.mu.Lock()
	if len(w.runs) >= maxWarmRuns {
		for k, r := range w.runs {
			if r.finished() {
				delete(w.runs, k)
			}
		}
	}
	for k, r := range w.runs {
		if k != key && r.pod == pod && !r.finished() {
			r.superseded = true
			r.cancel()
		}
	}
	w.runs[key] = run
	w.mu.Unlock()

	wake := &v1alpha1.DevEnvironment{}
	wake.Namespace, wake.Name = env.Namespace, env.Name
	go func() {
		defer cancel()
		release := w.turn(pod)
		out := w.runInLane(ctx, pod, run, plan, exec)
		release()
		out.ended = time.Now()
		run.mu.Lock()
		run.out, run.done = out, true
		run.mu.Unlock()
		w.wake <- event.GenericEvent{Object: client.Object(wake)}
	}()
	return run
}

// runInLane runs plan once it holds its lane: the one a superseded build
// of pod handed over, or its turn. A superseded build hands its lane to
// its successor (lanes_handoff.go) rather than leave it.
func (w *warmBuilds) runInLane(ctx context.Context, pod string, run *warmRun, plan warmPlan,
	exec func(ctx context.Context, step WarmStep, stdout, stderr io.Writer) error) warmOutcome {
	leave, ok := w.takeHandoff(pod, plan.lane, plan.holder)
	if !ok {
		var err error
		leave, err = w.lanes.acquire(ctx, plan.lane, plan.holder, func(holder string) {
			run.mu.Lock()
			run.queued, run.queuedBehind = true, holder
			run.mu.Unlock()
		})
		if err != nil {
			return warmOutcome{err: fmt.Errorf("waiting for the shared build cache: %w", err), timeout: plan.timeout}
		}
	}
	defer func() { w.leaveOrHandOff(pod, run, plan.lane, leave) }()
	run.mu.Lock()
	run.queued, run.queuedBehind = false, ""
	run.mu.Unlock()
	return w.runPlan(ctx, run, plan, exec)
}

// runPlan runs plan's claim and steps and says how the build ended.
func (w *warmBuilds) runPlan(ctx context.Context, run *warmRun, plan warmPlan,
	exec func(ctx context.Context, step WarmStep, stdout, stderr io.Writer) error) warmOutcome {
	stdout, stderr := &message.Tail{Max: 4096}, run.log
	out := warmOutcome{timeout: plan.timeout}
	fail := func(err error) warmOutcome {
		out.err, out.logTail = err, stderr.String()
		var code utilexec.CodeExitError
		if errors.As(err, &code) {
			out.exitCode = ptr.To(int32(code.Code))
		}
		return out
	}

	claimCtx, cancelClaim := context.WithTimeout(ctx, claimTimeout)
	err := exec(claimCtx, plan.claim, stdout, stderr)
	cancelClaim()
	if err != nil {
		// Not the build's failure: the exec broke or the helper could not
		// stop an earlier build; the next reconcile tries again.
		return fail(fmt.Errorf("step %s: %w", plan.claim.Name, withoutExitCode(err)))
	}
	var claim WarmClaim
	if line := message.LastLine(stdout.String()); json.Unmarshal([]byte(line), &claim) != nil || claim.Token == "" || claim.Started.IsZero() {
		return fail(fmt.Errorf("the warm builder's claim answered %q", line))
	}
	run.mu.Lock()
	run.started = claim.Started
	run.mu.Unlock()
	steps, err := plan.steps(claim.Token)
	if err != nil {
		return fail(err)
	}

	ctx, cancel := context.WithDeadline(ctx, claim.Started.Add(plan.timeout+warmGrace(plan.timeout)))
	defer cancel()
	stdout = &message.Tail{Max: 4096}
	// The steps' stderr is also counted for progress (progress.go).
	counted := io.MultiWriter(stderr, run.packages)
	for i, step := range steps {
		to := counted
		if i == len(steps)-1 {
			to = stdout
		}
		if err := exec(ctx, step, to, counted); err != nil {
			var code utilexec.CodeExitError
			out.timedOut = errors.Is(ctx.Err(), context.DeadlineExceeded) ||
				(step.Name == WarmStepRun && errors.As(err, &code) && code.Code == WarmExitTimedOut)
			if out.timedOut {
				out.logTail = stderr.String()
				return out
			}
			out.step = step.Name
			return fail(fmt.Errorf("step %s: %w", step.Name, err))
		}
	}
	out.logTail = stderr.String()
	report := message.LastLine(stdout.String())
	if jerr := json.Unmarshal([]byte(report), &out.report); jerr != nil || out.report.Digest == "" {
		return fail(fmt.Errorf("the warm builder reported %q, not a digest", report))
	}
	return out
}

// withoutExitCode keeps a failed claim from being read as the build
// command's exit code.
func withoutExitCode(err error) error {
	var code utilexec.CodeExitError
	if errors.As(err, &code) {
		return errors.New(err.Error())
	}
	return err
}

// retryDelay is how long after a timed-out attempt the next one starts:
// the timeout itself (at most 30 s) doubled per attempt, at most 10
// minutes. The cache the attempt filled makes the next one shorter.
func retryDelay(timeout time.Duration, attempt int) time.Duration {
	d := min(timeout, 30*time.Second)
	for i := 1; i < attempt && d < 10*time.Minute; i++ {
		d *= 2
	}
	return min(d, 10*time.Minute)
}

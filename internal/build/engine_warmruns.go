package build

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	wake chan event.GenericEvent
}

// podTurn is a pod's build lock and how many runs hold or wait for it.
type podTurn struct {
	mu    sync.Mutex
	users int
}

func newWarmBuilds() *warmBuilds {
	return &warmBuilds{runs: map[string]*warmRun{}, pods: map[string]*podTurn{}, wake: make(chan event.GenericEvent, 64)}
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
	started time.Time
	// log keeps the end of the steps' output (stderr) as it comes, for
	// status while the build runs.
	log  *message.Tail
	mu   sync.Mutex
	done bool
	out  warmOutcome
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

func (w *warmBuilds) forget(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.runs, key)
}

// start runs the steps of a build for key in the background, one after
// the other, each through exec, after the builds already running in the
// same pod, within timeout; it reconciles env when the build ends. The
// last step's stdout carries the report.
func (w *warmBuilds) start(key, pod string, env *v1alpha1.DevEnvironment, timeout time.Duration, steps []WarmStep,
	exec func(ctx context.Context, step WarmStep, stdout, stderr io.Writer) error) *warmRun {
	run := &warmRun{started: time.Now(), log: &message.Tail{Max: logTailBytes}}
	w.mu.Lock()
	if len(w.runs) >= maxWarmRuns {
		for k, r := range w.runs {
			if r.finished() {
				delete(w.runs, k)
			}
		}
	}
	w.runs[key] = run
	w.mu.Unlock()

	wake := &v1alpha1.DevEnvironment{}
	wake.Namespace, wake.Name = env.Namespace, env.Name
	go func() {
		release := w.turn(pod)
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		stdout, stderr := &message.Tail{Max: 4096}, run.log
		var err error
		timedOut := false
		for i, step := range steps {
			out := io.Writer(stderr)
			if i == len(steps)-1 {
				out = stdout
			}
			if err = exec(ctx, step, out, stderr); err != nil {
				timedOut = errors.Is(ctx.Err(), context.DeadlineExceeded)
				err = fmt.Errorf("step %s: %w", step.Name, err)
				break
			}
		}
		cancel()
		release()
		out := warmOutcome{logTail: stderr.String(), timedOut: timedOut, timeout: timeout}
		if err == nil {
			report := message.LastLine(stdout.String())
			if jerr := json.Unmarshal([]byte(report), &out.report); jerr != nil || out.report.Digest == "" {
				err = fmt.Errorf("the warm builder reported %q, not a digest", report)
			}
		}
		if err != nil {
			out.err = err
			var code utilexec.CodeExitError
			if errors.As(err, &code) {
				out.exitCode = ptr.To(int32(code.Code))
			}
		}
		run.mu.Lock()
		run.out, run.done = out, true
		run.mu.Unlock()
		w.wake <- event.GenericEvent{Object: client.Object(wake)}
	}()
	return run
}

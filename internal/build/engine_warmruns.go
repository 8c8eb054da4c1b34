package build

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/message"
)

// warmBuildTimeout bounds one build in a warm builder when the spec's
// run.timeout is not known here (the CRD defaults it to the same).
const warmBuildTimeout = 15 * time.Minute

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
	wake chan event.GenericEvent
}

func newWarmBuilds() *warmBuilds {
	return &warmBuilds{runs: map[string]*warmRun{}, wake: make(chan event.GenericEvent, 64)}
}

// warmRun is one build.
type warmRun struct {
	started time.Time
	mu      sync.Mutex
	done    bool
	out     warmOutcome
}

// warmOutcome is how a build ended: a report, or an error with the build
// command's exit code (nil when the exec itself failed) and its log tail.
type warmOutcome struct {
	report   AssembleReport
	err      error
	exitCode *int32
	logTail  string
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

// start runs exec in the background as the build for key and reconciles
// env when it ends.
func (w *warmBuilds) start(key string, env *v1alpha1.DevEnvironment, exec func(ctx context.Context, stdout, stderr *tailBuffer) error) *warmRun {
	run := &warmRun{started: time.Now()}
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
		ctx, cancel := context.WithTimeout(context.Background(), warmBuildTimeout)
		defer cancel()
		stdout, stderr := &tailBuffer{max: 4096}, &tailBuffer{max: logTailBytes}
		err := exec(ctx, stdout, stderr)
		out := warmOutcome{logTail: stderr.String()}
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

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append([]byte(nil), t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimRight(string(t.b), "\n")
}

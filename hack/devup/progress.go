package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/cli"
	"github.com/devloop-dev/devloop/internal/devcluster"
)

// heartbeat is the longest dev-up stays silent: a long step says it is
// still running, and how far it got, at least this often.
const heartbeat = 20 * time.Second

// reporter prints dev-up's lines, each with the time since the start.
type reporter struct {
	t0 time.Time
	mu sync.Mutex
}

func newReporter() *reporter { return &reporter{t0: time.Now()} }

func (r *reporter) step(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Printf("[%6.1fs] %s\n", time.Since(r.t0).Seconds(), fmt.Sprintf(format, args...))
}

// during runs fn, saying every heartbeat that it still runs; lines fn
// writes to progress (a package each, from go build -v) are counted into
// that line.
func (r *reporter) during(what string, fn func(progress io.Writer) error) error {
	var lines lineCounter
	done := make(chan struct{})
	start := time.Now()
	go func() {
		t := time.NewTicker(heartbeat)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if n := lines.n.Load(); n > 0 {
					r.step("  %s: %d packages compiled, %s", what, n, time.Since(start).Round(time.Second))
				} else {
					r.step("  %s: %s", what, time.Since(start).Round(time.Second))
				}
			}
		}
	}()
	err := fn(&lines)
	close(done)
	return err
}

// lineCounter counts the lines written to it.
type lineCounter struct{ n atomic.Int64 }

func (c *lineCounter) Write(p []byte) (int, error) {
	c.n.Add(int64(bytes.Count(p, []byte{'\n'})))
	return len(p), nil
}

// envWatch prints an environment's progress while dev-up waits for it: its
// summary when it changes and at least every heartbeat, and the log of
// every build the operator starts in a builder pod, as `kubectl devloop
// logs ENV COMPONENT/IMAGE -f` shows it.
type envWatch struct {
	ctx        context.Context
	cancel     context.CancelFunc
	r          *reporter
	kubeconfig string
	last       string
	lastAt     time.Time
	followed   map[string]bool
	wg         sync.WaitGroup
}

func newEnvWatch(ctx context.Context, r *reporter, kubeconfig string) *envWatch {
	ctx, cancel := context.WithCancel(ctx)
	return &envWatch{ctx: ctx, cancel: cancel, r: r, kubeconfig: kubeconfig, followed: map[string]bool{}}
}

func (w *envWatch) observe(env *v1alpha1.DevEnvironment) {
	line := devcluster.Summary(env)
	if line != w.last || time.Since(w.lastAt) >= heartbeat {
		w.r.step("  %s", line)
		w.last, w.lastAt = line, time.Now()
	}
	for _, comp := range env.Status.Components {
		if comp.Phase != v1alpha1.PhaseBuilding {
			continue
		}
		for _, img := range comp.Images {
			if img.Build == nil || img.Build.Job == "" {
				continue
			}
			key := comp.Name + "/" + img.Name + " " + img.Build.Job
			if img.Build.StartTime != nil {
				key += " " + img.Build.StartTime.String()
			}
			if w.followed[key] {
				continue
			}
			w.followed[key] = true
			w.wg.Add(1)
			go w.follow(env.Namespace, env.Name, comp.Name+"/"+img.Name)
		}
	}
}

// follow streams one build's log through the plugin's own logs command.
func (w *envWatch) follow(ns, env, target string) {
	defer w.wg.Done()
	out := &prefixWriter{r: w.r, prefix: "  build " + target + " | "}
	cli.Run(w.ctx, []string{"--kubeconfig", w.kubeconfig, "-n", ns, "logs", env, target, "-f"},
		genericiooptions.IOStreams{In: bytes.NewReader(nil), Out: out, ErrOut: out}, cli.Options{})
	out.flush()
}

// stop ends the log streams.
func (w *envWatch) stop() {
	w.cancel()
	w.wg.Wait()
}

// prefixWriter prints each complete line through the reporter.
type prefixWriter struct {
	r      *reporter
	prefix string
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			break
		}
		p.r.step("%s%s", p.prefix, p.buf[:i])
		p.buf = p.buf[i+1:]
	}
	return len(b), nil
}

func (p *prefixWriter) flush() {
	if len(p.buf) > 0 {
		p.r.step("%s%s", p.prefix, p.buf)
		p.buf = nil
	}
}

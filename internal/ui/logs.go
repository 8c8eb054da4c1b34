package ui

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// LogTarget is which log the page asks for.
type LogTarget struct {
	// Kind is component (its pods), build (COMPONENT/IMAGE's latest
	// build), test (a suite's run) or all (the combined log: every
	// component's pods, build and newest run, followed).
	Kind string
	// Name is the component, COMPONENT/IMAGE, or suite.
	Name string
	// Run is the test run's number; 0 for the latest.
	Run int64
	// Container narrows a component's pods to one container.
	Container string
	// Follow keeps streaming.
	Follow bool
}

// LogLine is one line of a log; Stream names its pod/container when the
// target has several.
type LogLine struct {
	// Resource is component/NAME, build/COMPONENT/IMAGE or test/SUITE in
	// the combined log.
	Resource string    `json:"resource,omitempty"`
	Stream   string    `json:"stream,omitempty"`
	Text     string    `json:"text"`
	Time     time.Time `json:"time"`
}

// LogRingSize is how many lines one log stream keeps while the page has
// not taken them: a producer faster than the page overwrites the oldest
// and the page is told how many it missed. Memory stays bounded however
// long a follow runs.
const LogRingSize = 2000

// maxLogLine bounds one line (a minified JSON blob, a binary dump).
const maxLogLine = 8 << 10

// logRing is a bounded queue of lines between the log reader and the
// page.
type logRing struct {
	mu      sync.Mutex
	lines   []LogLine
	start   int
	n       int
	dropped int
	wake    chan struct{}
}

func newLogRing(size int) *logRing {
	return &logRing{lines: make([]LogLine, size), wake: make(chan struct{}, 1)}
}

func (r *logRing) push(l LogLine) {
	if len(l.Text) > maxLogLine {
		l.Text = l.Text[:maxLogLine] + "… (cut)"
	}
	r.mu.Lock()
	if r.n == len(r.lines) {
		r.start = (r.start + 1) % len(r.lines)
		r.n--
		r.dropped++
	}
	r.lines[(r.start+r.n)%len(r.lines)] = l
	r.n++
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// take returns the queued lines and how many were dropped since the last
// take.
func (r *logRing) take() ([]LogLine, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]LogLine, r.n)
	for i := range r.n {
		out[i] = r.lines[(r.start+i)%len(r.lines)]
	}
	r.start, r.n = 0, 0
	d := r.dropped
	r.dropped = 0
	return out, d
}

// logs streams a target's log as server-sent events: line batches, a
// dropped count when the page fell behind, and end (with the error, if
// any) when the log ends.
func (h *Handlers) logs(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	q := r.URL.Query()
	ns, env := q.Get("namespace"), q.Get("env")
	t := LogTarget{Kind: q.Get("kind"), Name: q.Get("name"), Container: q.Get("container"), Follow: q.Get("follow") == "1"}
	if run := q.Get("run"); run != "" {
		n, err := strconv.ParseInt(run, 10, 64)
		if err != nil || n < 0 {
			http.Error(w, "run: want a run number", http.StatusBadRequest)
			return
		}
		t.Run = n
	}
	switch {
	case ns == "" || env == "" || (t.Name == "" && t.Kind != "all"):
		http.Error(w, "namespace, env and name are required", http.StatusBadRequest)
		return
	case t.Kind != "component" && t.Kind != "build" && t.Kind != "test" && t.Kind != "all":
		http.Error(w, "kind: want component, build, test or all", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl.Flush()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	ring := newLogRing(LogRingSize)
	ended := make(chan error, 1)
	go func() {
		ended <- h.Actions.Logs(ctx, ns, env, t, ring.push)
	}()
	flush := func() {
		lines, dropped := ring.take()
		if dropped > 0 {
			writeEvent(w, "dropped", dropped)
		}
		if len(lines) > 0 {
			writeEvent(w, "lines", lines)
		}
		fl.Flush()
	}
	keepAlive := time.NewTicker(15 * time.Second)
	defer keepAlive.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ring.wake:
			flush()
		case <-keepAlive.C:
			writeEvent(w, "ping", 0)
			fl.Flush()
		case err := <-ended:
			flush()
			msg := ""
			if err != nil {
				msg = bounded(err.Error(), 1024)
			}
			writeEvent(w, "end", map[string]string{"error": msg})
			fl.Flush()
			return
		}
	}
}

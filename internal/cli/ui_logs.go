package cli

import (
	"bufio"
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devloop-dev/devloop/internal/ui"
)

// podLogs is the dashboard's log of a component's pods. Unlike `kubectl
// devloop logs -f`, which follows the pods it found first, it looks for
// the component's pods again at every poll interval while following, so
// a rollout's new pods join the pane as the old ones end; and it asks for
// the kubelet's timestamps, so each line carries the time the pod wrote
// it, not the time the plugin read it.
type podLogs struct {
	a         *app
	s         *session
	envName   string
	target    *logsTarget
	container string
	emit      func(ui.LogLine)

	mu      sync.Mutex
	streams map[logStream]*podStream
}

// podStream is what is known of one container's log.
type podStream struct {
	running bool
	// last is the newest line's time: a stream read again (the container
	// restarted) starts there and skips what was shown.
	last time.Time
}

func (p *podLogs) run(ctx context.Context, follow bool) error {
	src := p.a.logSource(p.s)
	p.streams = map[logStream]*podStream{}
	var wg sync.WaitGroup
	defer wg.Wait()
	for first := true; ; first = false {
		env, err := p.s.getEnv(ctx, p.envName)
		if err != nil {
			return err
		}
		pods, err := p.a.targetPods(ctx, p.s, env, p.target)
		if err != nil {
			return err
		}
		if first && len(pods) == 0 && !follow {
			return fmt.Errorf("%s has no pods (yet): follow to wait for them", p.target.what)
		}
		live := map[string]bool{}
		for _, pod := range pods {
			live[pod.Name] = pod.DeletionTimestamp == nil && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
		}
		streams := containersOf(pods, p.container)
		if first && len(streams) == 0 && len(pods) > 0 {
			return fmt.Errorf("no container %q in pods %s", p.container, podNames(pods))
		}
		for _, st := range streams {
			p.mu.Lock()
			ps, seen := p.streams[st]
			start := !seen || (!ps.running && follow && live[st.pod])
			if !seen {
				ps = &podStream{}
				p.streams[st] = ps
			}
			if start {
				ps.running = true
			}
			p.mu.Unlock()
			if !start {
				continue
			}
			if !seen && !first {
				p.emit(ui.LogLine{Stream: "devloop", Text: "following " + st.String() + " (new pod)", Time: time.Now()})
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := p.copy(ctx, src, st, ps, follow)
				if err != nil && ctx.Err() == nil && !follow {
					p.emit(ui.LogLine{Stream: "devloop", Text: st.String() + ": " + err.Error(), Time: time.Now()})
				}
				p.mu.Lock()
				ps.running = false
				p.mu.Unlock()
			}()
		}
		if !follow {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(p.a.opts.PollInterval):
		}
	}
}

// copy reads one container's log with the kubelet's timestamps.
func (p *podLogs) copy(ctx context.Context, src LogSource, st logStream, ps *podStream, follow bool) error {
	p.mu.Lock()
	last := ps.last
	p.mu.Unlock()
	o := &corev1.PodLogOptions{Container: st.container, Follow: follow, Timestamps: true}
	if !last.IsZero() {
		o.SinceTime = &metav1.Time{Time: last}
	}
	rc, err := src.Stream(ctx, st.namespace, st.pod, o)
	if err != nil {
		return err
	}
	defer rc.Close()
	sc := bufio.NewScanner(rc)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		at, text := splitTimestamp(sc.Text())
		if !last.IsZero() && !at.After(last) {
			// Shown already: sinceTime counts whole seconds.
			continue
		}
		p.mu.Lock()
		ps.last = at
		p.mu.Unlock()
		p.emit(ui.LogLine{Stream: st.String(), Text: text, Time: at})
	}
	return sc.Err()
}

// splitTimestamp splits the RFC 3339 time the kubelet puts before each
// line with timestamps=true; a line without one is stamped now.
func splitTimestamp(line string) (time.Time, string) {
	ts, rest, ok := strings.Cut(line, " ")
	if ok {
		if at, err := time.Parse(time.RFC3339Nano, ts); err == nil {
			return at, rest
		}
	}
	return time.Now(), line
}

package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// LogSource reads a container's log; the kubelet serves it through the API
// server's pods/log. Tests stand in for the kubelet, which envtest lacks.
type LogSource interface {
	Stream(ctx context.Context, namespace, pod string, o *corev1.PodLogOptions) (io.ReadCloser, error)
}

// apiLogs reads logs through the API server.
type apiLogs struct{ clientset kubernetes.Interface }

func (l apiLogs) Stream(ctx context.Context, namespace, pod string, o *corev1.PodLogOptions) (io.ReadCloser, error) {
	return l.clientset.CoreV1().Pods(namespace).GetLogs(pod, o).Stream(ctx)
}

// streamOptions narrow what streamPods reads: one container, and only
// from a time on.
type streamOptions struct {
	container string
	since     *metav1.Time
}

func (a *app) logSource(s *session) LogSource {
	if a.opts.Logs != nil {
		return a.opts.Logs
	}
	return apiLogs{clientset: s.clientset}
}

// logStream is one container of one pod.
type logStream struct {
	namespace, pod, container string
}

func (l logStream) String() string { return l.pod + "/" + l.container }

// containersOf lists a pod's containers in the order they run: init
// containers first. With only set, that container alone.
func containersOf(pods []corev1.Pod, only string) []logStream {
	var out []logStream
	for _, p := range pods {
		for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
			for _, c := range cs {
				if only == "" || c.Name == only {
					out = append(out, logStream{p.Namespace, p.Name, c.Name})
				}
			}
		}
	}
	return out
}

// streamPods prints every container's log: one after the other, or, with
// --follow, all at once with each line whole. Lines carry a
// [pod/container] prefix when there is more than one stream.
func (a *app) streamPods(ctx context.Context, s *session, pods []corev1.Pod, f *logsFlags, o streamOptions) error {
	streams := containersOf(pods, o.container)
	if len(streams) == 0 {
		return fmt.Errorf("no container %q in pods %s", o.container, podNames(pods))
	}
	opts := func(st logStream, follow bool) *corev1.PodLogOptions {
		lo := &corev1.PodLogOptions{Container: st.container, Follow: follow, SinceTime: o.since, Timestamps: f.timestamps}
		if f.tail >= 0 {
			lo.TailLines = &f.tail
		}
		return lo
	}
	src := a.logSource(s)
	w := &lineWriter{w: a.out()}
	prefix := len(streams) > 1
	if !f.follow {
		for _, st := range streams {
			if err := copyLog(ctx, src, st, w, prefix, opts(st, false)); err != nil {
				fmt.Fprintf(a.errOut(), "%s: %v\n", st, err)
			}
		}
		return nil
	}
	var wg sync.WaitGroup
	for _, st := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A container that has not started has no log yet: try again
			// until it has, or Ctrl-C.
			for ctx.Err() == nil {
				err := copyLog(ctx, src, st, w, prefix, opts(st, true))
				if err == nil || ctx.Err() != nil {
					return
				}
				time.Sleep(a.opts.PollInterval)
			}
		}()
	}
	wg.Wait()
	return nil
}

func copyLog(ctx context.Context, src LogSource, st logStream, w *lineWriter, prefix bool, o *corev1.PodLogOptions) error {
	rc, err := src.Stream(ctx, st.namespace, st.pod, o)
	if err != nil {
		return err
	}
	defer rc.Close()
	p := ""
	if prefix {
		p = "[" + st.String() + "] "
	}
	sc := bufio.NewScanner(rc)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		w.line(p + sc.Text())
	}
	return sc.Err()
}

// lineWriter writes whole lines from several goroutines.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) line(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintln(l.w, s)
}

func podNames(pods []corev1.Pod) string {
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	return strings.Join(names, ", ")
}

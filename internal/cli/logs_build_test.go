package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
)

// liveLogs stands in for the kubelet serving a container that runs on, as
// a warm builder's does: a followed log gives a line and then stays open
// until the reader goes; a plain read gives what was written so far.
type liveLogs struct {
	mu   sync.Mutex
	read []corev1.PodLogOptions
}

func (l *liveLogs) Stream(ctx context.Context, ns, pod string, o *corev1.PodLogOptions) (io.ReadCloser, error) {
	l.mu.Lock()
	l.read = append(l.read, *o)
	l.mu.Unlock()
	if !o.Follow {
		return io.NopCloser(strings.NewReader(fmt.Sprintf("%s/%s compiling pkg/scheduler\n", pod, o.Container))), nil
	}
	r, w := io.Pipe()
	go func() {
		fmt.Fprintf(w, "%s/%s compiling pkg/scheduler\n", pod, o.Container)
		<-ctx.Done()
		w.CloseWithError(ctx.Err())
	}()
	return r, nil
}

func (l *liveLogs) reads() []corev1.PodLogOptions {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]corev1.PodLogOptions(nil), l.read...)
}

// warmSpec is teamSpec with web built in a warm builder.
func warmSpec() v1alpha1.DevEnvironmentSpec {
	spec := teamSpec()
	spec.Components[1].Images[0].Run = &v1alpha1.BuildRun{Image: "golang:1.25", Command: []string{"make", "web"}, KeepWarm: true}
	return spec
}

// TestLogsOfAWarmBuildFollowItUntilItEnds is issue 18 item 11: during a
// warm build, `logs ENV COMPONENT/IMAGE` printed "has no pods (yet)" and
// --follow waited forever. It reads the warm builder's build container
// from the build's start; --follow waits for the build to start, streams
// it, and ends when status says the build ended, saying how; status names
// the warm builder as such, with the build's last line of output.
func TestLogsOfAWarmBuildFollowItUntilItEnds(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "cli-")
	createEnv(t, ns, "team", warmSpec())

	// Before the build starts: a plain read says so; --follow waits.
	r := logsPlugin(t, &fakeLogs{}, "logs", "team", "web/web", "-n", ns)
	if r.code != 1 || !strings.Contains(r.err, "image web of component web has not started building yet: add --follow") {
		t.Fatalf("before the build:\n%s", r)
	}
	logs := &liveLogs{}
	opts := testOptions()
	opts.Logs = logs
	out, errOut, wait := pluginInBackground(t, opts, "logs", "team", "web/web", "-f", "-n", ns)
	waitUntil(t, "the wait for the build", func() bool { return strings.Contains(errOut.String(), "waiting for the pods of build of web/web") })

	// The build starts in the warm builder.
	started := metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))
	create(t, pod(ns, "team-web-amd64-warm", map[string]string{v1alpha1.LabelRole: v1alpha1.RoleWarmBuild}, "build", "fetch-push"))
	playOperator(t, ns, "team", func(env *v1alpha1.DevEnvironment) {
		env.Status.Components = []v1alpha1.ComponentStatus{{Name: "web", Phase: v1alpha1.PhaseBuilding, Images: []v1alpha1.ImageStatus{
			{Name: "web", Build: &v1alpha1.BuildStatus{Job: "team-web-amd64-warm", Result: v1alpha1.BuildRunning, StartTime: &started,
				LogTail: "fetched source app\ncompiling pkg/scheduler"}}}}}
	})
	waitUntil(t, "the build's output", func() bool { return strings.Contains(out.String(), "compiling pkg/scheduler") })

	// Status, meanwhile, says where the build runs and how it goes.
	st := plugin(t, "status", "team", "-n", ns)
	if !strings.Contains(st.out, "warm builder pod/team-web-amd64-warm  Running") || !strings.Contains(st.out, "compiling pkg/scheduler") || strings.Contains(st.out, "build job/") {
		t.Errorf("status of a warm build:\n%s", st.out)
	}

	// It fails: the follow ends, saying so.
	playOperator(t, ns, "team", func(env *v1alpha1.DevEnvironment) {
		b := env.Status.Components[0].Images[0].Build
		b.Result, b.ExitCode = v1alpha1.BuildFailed, ptrTo(int32(2))
	})
	done := make(chan int, 1)
	go func() { done <- wait() }()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d\n%s%s", code, out.String(), errOut.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("--follow did not end with the build\n%s%s", out.String(), errOut.String())
	}
	if got := out.String(); got != "team-web-amd64-warm/build compiling pkg/scheduler\n" {
		t.Errorf("followed output %q: want the build container's only, without prefix", got)
	}
	if !strings.Contains(errOut.String(), "build Failed (exit code 2)") {
		t.Errorf("the end of the build is not said:\n%s", errOut.String())
	}
	for _, o := range logs.reads() {
		if o.Container != "build" || o.SinceTime == nil || !o.SinceTime.Equal(&started) {
			t.Errorf("read %+v: want the build container since the build's start %s", o, started)
		}
	}

	// After it: the build's output, read once.
	r = logsPlugin(t, &fakeLogs{}, "logs", "team", "web/web", "-n", ns)
	if r.code != 0 || r.out != "team-web-amd64-warm/build line 1\nteam-web-amd64-warm/build line 2\n" {
		t.Fatalf("after the build:\n%s", r)
	}
}

func ptrTo[T any](v T) *T { return &v }

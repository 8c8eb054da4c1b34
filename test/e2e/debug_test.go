//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-delve/delve/service/api"
	"github.com/go-delve/delve/service/rpc2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/cli"
	. "github.com/devloop-dev/devloop/test/builder"
	. "github.com/devloop-dev/devloop/test/e2e/fixture"
	"github.com/devloop-dev/devloop/test/e2e/poll"
)

// debugServerMain is a Go HTTP server whose handler has a line to break
// on (marked) and a local variable to read there.
const debugServerMain = `package main

import (
	"fmt"
	"net/http"
	"os"
)

func hello(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("name")
	greeting := "hello, " + name // breakpoint
	fmt.Fprintln(w, greeting)
}

func main() {
	http.HandleFunc("/", hello)
	fmt.Fprintln(os.Stderr, "listening on :8080")
	if err := http.ListenAndServe(":8080", nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
`

// debugServerManifests run the server image: the readiness probe is a TCP
// one, so a process stopped at a breakpoint stays Ready (the kernel still
// accepts connections) and no probe request stops at the breakpoint.
var debugServerManifests = Deployment("server", "server", "image: server",
	"ports: [{name: http, containerPort: 8080}]",
	"readinessProbe: {tcpSocket: {port: http}, periodSeconds: 1}",
	"livenessProbe: {tcpSocket: {port: http}, periodSeconds: 5}")

// breakpointLine is the line of debugServerMain marked for the breakpoint.
func breakpointLine(t *testing.T) int {
	for i, l := range strings.Split(debugServerMain, "\n") {
		if strings.HasSuffix(l, "// breakpoint") {
			return i + 1
		}
	}
	t.Fatal("no breakpoint line in debugServerMain")
	return 0
}

// runPlugin runs `kubectl devloop ARGS` in-process until ctx ends; the
// returned channel gets its exit code.
func runPlugin(ctx context.Context, kubeconfig, ns string, out, errOut io.Writer, args ...string) <-chan int {
	return runPluginWith(ctx, cli.Options{PollInterval: 500 * time.Millisecond, ProgressInterval: 30 * time.Second}, kubeconfig, ns, out, errOut, args...)
}

// runPluginWith is runPlugin with the plugin's own intervals.
func runPluginWith(ctx context.Context, opts cli.Options, kubeconfig, ns string, out, errOut io.Writer, args ...string) <-chan int {
	exited := make(chan int, 1)
	go func() {
		streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: out, ErrOut: errOut}
		exited <- cli.Run(ctx, append([]string{"--kubeconfig", kubeconfig, "-n", ns}, args...), streams, opts)
	}()
	return exited
}

// withOutput adds what a running plugin wrote to what probe saw.
func withOutput(probe poll.Probe, out, errOut *lockedBuffer) poll.Probe {
	return func(ctx context.Context) (string, bool, error) {
		seen, ok, err := probe(ctx)
		return seen + "; plugin output:\n" + out.String() + errOut.String(), ok, err
	}
}

// waitOutput waits until a running plugin's output says want; what was
// seen last is all it wrote.
func waitOutput(t *testing.T, w poll.Wait, out, errOut *lockedBuffer, want string) {
	t.Helper()
	waitFor(t, w, func(context.Context) (string, bool, error) {
		o := out.String()
		return "output:\n" + o + errOut.String(), strings.Contains(o, want), nil
	})
}

// freeLocalPort is a local port nothing listens on (now).
func freeLocalPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestDebugAttachesDelve is issue 19's debugger on the real cluster: a Go
// HTTP server built by a run step in the Go builder image runs; `kubectl
// devloop debug` (in-process) puts it in debug mode, waits for the debug
// build (delve go-installed in the builder) to run Ready under delve in
// the restricted namespace, and forwards delve's port; a headless delve
// client (rpc2, what `dlv connect` speaks) sets a breakpoint in the
// handler by file:line, an HTTP request through `port-forward` stops
// there with the request's value in a local variable, continuing answers
// the request; `debug --off` brings the normal build back.
func TestDebugAttachesDelve(t *testing.T) {
	longCase(t)
	c := need(t)
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t, "e2e-debug")
	goproxy := delveGoProxy(t)
	httpPort, dlvPort := freeLocalPort(t), freeLocalPort(t)
	env := newEnv(ns, "dbg").Registry().Components(Component("server",
		Images(Image("server", Base(busybox), Program("out/server", "/server"),
			Run(GoBuild(goImage, []string{"go", "build", "-o", "out/server", "."},
				GoPath, v1alpha1.EnvVar{Name: "GOPROXY", Value: goproxy}, v1alpha1.EnvVar{Name: "GOSUMDB", Value: "off"})))),
		Manifests("deploy"), Forward("http", httpPort, "deploy/server:http"))).Build()
	pushOnly(t, env, sourceDir(t, Files{
		"go.mod":             GoModule("example.com/server"),
		"main.go":            debugServerMain,
		"deploy/server.yaml": debugServerManifests,
	}))
	start := time.Now()
	g.Expect(c.Client.Create(ctx, env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)
	env = waitEnv(t, key, 6*time.Minute, false, func(g Gomega, env *v1alpha1.DevEnvironment) {
		readyNow(g, env)
		g.Expect(imageOf(env, "server").Digest).NotTo(BeEmpty())
	})
	normal := imageOf(env, "server").Digest
	t.Logf("normal build Ready in %s: %s", time.Since(start).Round(time.Millisecond), normal)

	// debug: the annotation, the debug build, its pod Ready, the forward.
	dbgCtx, stopDebug := context.WithCancel(ctx)
	defer stopDebug()
	var dbgOut, dbgErr lockedBuffer
	start = time.Now()
	debugExited := runPlugin(dbgCtx, c.Kubeconfig, ns, &dbgOut, &dbgErr, "debug", "dbg", "server", "--port", fmt.Sprint(dlvPort), "--timeout", "15m")
	waitOutput(t, poll.Wait{What: "`debug` says how to connect", Every: time.Second, Within: 16 * time.Minute},
		&dbgOut, &dbgErr, fmt.Sprintf("dlv connect localhost:%d", dlvPort))
	t.Logf("debug build running under delve %s after `debug`", time.Since(start).Round(time.Millisecond))

	g.Expect(c.Client.Get(ctx, key, env)).To(Succeed())
	ist := imageOf(env, "server")
	g.Expect(ist.Debug).To(BeTrue(), "status images[].debug")
	g.Expect(ist.Digest).NotTo(Equal(normal))
	d := &appsv1.Deployment{}
	g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "server"}, d)).To(Succeed())
	ctr := d.Spec.Template.Spec.Containers[0]
	g.Expect(ctr.Command).To(HaveExactElements("/dlv", "exec", "--headless", "--listen=127.0.0.1:40000", "--only-same-user=false", "--api-version=2",
		"--accept-multiclient", "--continue", "/server", "--"))
	g.Expect(ctr.LivenessProbe).To(BeNil(), "a paused process must not be killed by its liveness probe")
	// The namespace enforces the restricted Pod Security level, so the
	// pod running delve was admitted as restricted: non-root, no
	// privilege escalation, all capabilities dropped, RuntimeDefault
	// seccomp. delve traces its own child (PTRACE_TRACEME), which needs
	// no capability.
	nsObj := &corev1.Namespace{}
	g.Expect(c.Client.Get(ctx, client.ObjectKey{Name: ns}, nsObj)).To(Succeed())
	g.Expect(nsObj.Labels).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce", "restricted"))
	pods := &corev1.PodList{}
	g.Expect(c.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app": "server"})).To(Succeed())
	var debugPod *corev1.Pod
	for i := range pods.Items {
		if strings.HasSuffix(pods.Items[i].Spec.Containers[0].Image, "@"+ist.Digest) && pods.Items[i].DeletionTimestamp == nil {
			debugPod = &pods.Items[i]
		}
	}
	g.Expect(debugPod).NotTo(BeNil())
	sc := debugPod.Spec.Containers[0].SecurityContext
	t.Logf("debug pod %s: runAsUser %d, allowPrivilegeEscalation %v, capabilities %v, seccomp %s", debugPod.Name,
		*debugPod.Spec.SecurityContext.RunAsUser, *sc.AllowPrivilegeEscalation, sc.Capabilities.Drop, debugPod.Spec.SecurityContext.SeccompProfile.Type)

	// The HTTP port through `port-forward`, as a user would open it.
	pfCtx, stopPF := context.WithCancel(ctx)
	defer stopPF()
	var pfOut, pfErr lockedBuffer
	pfExited := runPlugin(pfCtx, c.Kubeconfig, ns, &pfOut, &pfErr, "port-forward", "dbg")
	waitOutput(t, poll.Wait{What: "`port-forward` forwards the HTTP port", Every: 10 * time.Millisecond, Within: 30 * time.Second},
		&pfOut, &pfErr, fmt.Sprintf("http://localhost:%d", httpPort))

	// Issue 31.2: no other pod reaches delve on the pod IP; the
	// port-forward does (attachDelve).
	expectDelveUnreachableOnPodIP(t, debugPod, 8080)
	attachDelve(t, dlvPort, httpPort)

	stopPF()
	stopDebug()
	for name, exited := range map[string]<-chan int{"port-forward": pfExited, "debug": debugExited} {
		select {
		case code := <-exited:
			g.Expect(code).To(Equal(0), "%s output:\n%s%s%s%s", name, &dbgOut, &dbgErr, &pfOut, &pfErr)
		case <-time.After(15 * time.Second):
			t.Fatalf("%s did not stop on Ctrl-C", name)
		}
	}
	t.Logf("debug output:\n%s", &dbgOut)

	// --off: the normal build again, its containers as written.
	var offOut, offErr lockedBuffer
	start = time.Now()
	g.Expect(<-runPlugin(ctx, c.Kubeconfig, ns, &offOut, &offErr, "debug", "dbg", "server", "--off")).To(Equal(0), "%s%s", &offOut, &offErr)
	env = waitEnv(t, key, 10*time.Minute, false, func(g Gomega, env *v1alpha1.DevEnvironment) {
		readyNow(g, env)
		g.Expect(imageOf(env, "server").Debug).To(BeFalse())
		d := &appsv1.Deployment{}
		g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "server"}, d)).To(Succeed())
		g.Expect(d.Spec.Template.Spec.Containers[0].Command).To(BeEmpty())
		g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(HaveSuffix("@" + imageOf(env, "server").Digest))
		g.Expect(d.Status.UpdatedReplicas).To(Equal(int32(1)))
		g.Expect(d.Status.ReadyReplicas).To(Equal(int32(1)))
	})
	t.Logf("--off: normal build %s Ready again in %s (same digest as the first normal build: %v)",
		imageOf(env, "server").Digest, time.Since(start).Round(time.Millisecond), imageOf(env, "server").Digest == normal)
}

// attachDelve connects a headless delve client to the forwarded port,
// stops the running server, breaks at the handler's marked line by
// file:line, sends a request through the HTTP forward, sees the
// breakpoint hit with the request's value in scope, and lets the request
// finish.
func attachDelve(t *testing.T, dlvPort, httpPort int) {
	g := NewWithT(t)
	line := breakpointLine(t)
	conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", dlvPort), 10*time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	dlv := rpc2.NewClientFromConn(conn)
	defer conn.Close()
	v := dlv.GetVersion()
	t.Logf("connected to delve %s (API v%d)", v.DelveVersion, v.APIVersion)

	start := time.Now()
	_, err = dlv.Halt()
	g.Expect(err).NotTo(HaveOccurred(), "halting the server")
	sources, err := dlv.ListSources(`/main\.go$`)
	g.Expect(err).NotTo(HaveOccurred())
	var file string
	for _, s := range sources {
		if !strings.Contains(s, "/src/") && !strings.Contains(s, "/pkg/mod/") { // the module's own, not GOROOT's
			file = s
		}
	}
	g.Expect(file).NotTo(BeEmpty(), "main.go among %v", sources)
	bp, err := dlv.CreateBreakpoint(&api.Breakpoint{File: file, Line: line})
	g.Expect(err).NotTo(HaveOccurred(), "breakpoint at %s:%d", file, line)
	t.Logf("breakpoint %d at %s:%d (%s)", bp.ID, bp.File, bp.Line, bp.FunctionName)

	stopped := dlv.Continue()
	answer := make(chan string, 1)
	go func() {
		httpc := &http.Client{Timeout: 2 * time.Minute}
		resp, err := httpc.Get(fmt.Sprintf("http://localhost:%d/?name=devloop", httpPort))
		if err != nil {
			answer <- "error: " + err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		answer <- strings.TrimSpace(string(b))
	}()
	var state *api.DebuggerState
	select {
	case state = <-stopped:
	case a := <-answer:
		t.Fatalf("the request was answered (%q) without stopping at the breakpoint", a)
	case <-time.After(time.Minute):
		t.Fatal("the breakpoint was not hit within a minute")
	}
	g.Expect(state.Err).NotTo(HaveOccurred())
	g.Expect(state.CurrentThread).NotTo(BeNil())
	g.Expect(state.CurrentThread.Breakpoint).NotTo(BeNil(), "stopped, but not at a breakpoint: %+v", state.CurrentThread)
	g.Expect(state.CurrentThread.Breakpoint.ID).To(Equal(bp.ID))
	g.Expect(state.CurrentThread.Line).To(Equal(line))
	name, err := dlv.EvalVariable(api.EvalScope{GoroutineID: -1}, "name", api.LoadConfig{MaxStringLen: 64})
	g.Expect(err).NotTo(HaveOccurred(), "reading local variable name (optimizations off)")
	g.Expect(name.Value).To(Equal("devloop"))
	t.Logf("breakpoint hit at %s:%d in %s with name=%q, %s after attaching", state.CurrentThread.File, state.CurrentThread.Line,
		state.CurrentThread.Function.Name(), name.Value, time.Since(start).Round(time.Millisecond))

	_, err = dlv.ClearBreakpoint(bp.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(dlv.Disconnect(true)).To(Succeed(), "continue and disconnect, leaving the server running")
	select {
	case a := <-answer:
		g.Expect(a).To(Equal("hello, devloop"))
	case <-time.After(time.Minute):
		t.Fatal("the request was not answered after continuing")
	}
}

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// forwarder keeps one local port forwarded to whichever Ready pod is
// behind its target: a pod going away (a rollout, a deletion) or a broken
// connection makes it resolve the target again, and new local connections
// go to the new pod; connections already open finish on the old one.
type forwarder struct {
	name      string // components[].ports[].name
	component string
	namespace string
	target    forwardTarget
	local     int32
	// portHint says how to pick another local port when it is in use;
	// raw marks a port that speaks no HTTP (no http:// URL printed).
	portHint string
	raw      bool
	s        *session
	log      *syncWriter
	poll     time.Duration

	listeners []net.Listener
	nextID    atomic.Int64

	mu      sync.Mutex
	cur     *podTunnel
	lastPod string
	lastErr string
}

// podTunnel is a port-forward connection to one pod.
type podTunnel struct {
	pod     string
	port    int32
	conn    httpstream.Connection
	active  int  // local connections using it
	retired bool // no new connections; closed when active drops to 0
}

// syncWriter serialises the lines of several forwarders.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (w *syncWriter) printf(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	fmt.Fprintf(w.w, format, args...)
}

// listen binds the local port on the loopback: a port in use fails here,
// before anything is forwarded, naming the port and the component. IPv4
// must work; IPv6's loopback is taken too when there is one, as kubectl
// does, so that clients resolving localhost to ::1 first get through.
func (f *forwarder) listen() error {
	port := strconv.Itoa(int(f.local))
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			hint := valueOr(f.portHint, "change components[].ports[].local")
			return fmt.Errorf("local port %d (port-forward %s of component %s) is already in use: stop what listens there or %s", f.local, f.name, f.component, hint)
		}
		return fmt.Errorf("port-forward %s of component %s: listening on local port %d: %w", f.name, f.component, f.local, err)
	}
	f.listeners = []net.Listener{l}
	if l6, err := net.Listen("tcp", net.JoinHostPort("::1", port)); err == nil {
		f.listeners = append(f.listeners, l6)
	}
	return nil
}

// close stops listening.
func (f *forwarder) close() {
	for _, l := range f.listeners {
		l.Close()
	}
}

// run serves the local port until ctx ends: it connects to a pod (with
// backoff while there is none, or the API server is away), accepts local
// connections and watches the pod so that a rollout moves the forward.
func (f *forwarder) run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { f.follow(ctx) })
	for _, l := range f.listeners {
		wg.Go(func() {
			for {
				conn, err := l.Accept()
				if err != nil {
					return
				}
				go f.handle(ctx, conn)
			}
		})
	}
	<-ctx.Done()
	f.close()
	wg.Wait()
	// Connections still copying end with ctx (handle); the pod's
	// connection closes when the last of them is done.
	f.mu.Lock()
	t := f.cur
	f.mu.Unlock()
	if t != nil {
		f.retire(t)
	}
}

// follow checks the current pod every poll; when it is gone, being
// deleted or not Ready, or its connection closed, the forward moves to a
// pod resolved again. Failures back off up to 10s and say so once.
func (f *forwarder) follow(ctx context.Context) {
	backoff := f.poll
	for {
		wait := f.poll
		if _, err := f.tunnel(ctx, false); err != nil {
			wait = backoff
			backoff = min(backoff*2, 10*time.Second)
		} else {
			backoff = f.poll
			f.checkPod(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// checkPod retires the current tunnel when its pod cannot serve any more.
func (f *forwarder) checkPod(ctx context.Context) {
	f.mu.Lock()
	t := f.cur
	f.mu.Unlock()
	if t == nil {
		return
	}
	pod := &corev1.Pod{}
	err := f.s.client.Get(ctx, client.ObjectKey{Namespace: f.namespace, Name: t.pod}, pod)
	why := ""
	switch {
	case err == nil:
		why = notServing(pod)
	case client.IgnoreNotFound(err) == nil:
		why = t.pod + " is gone"
	default:
		return // the API server is away: the connection's own state decides
	}
	if why != "" {
		f.retire(t)
	}
}

// tunnel is the connection to the current pod, made anew when there is
// none (or it closed). With acquire, the caller holds it (release gives it
// back), taken under the same lock so that it is not closed in between.
func (f *forwarder) tunnel(ctx context.Context, acquire bool) (t *podTunnel, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer func() {
		if t != nil && acquire {
			t.active++
		}
	}()
	if f.cur != nil {
		select {
		case <-f.cur.conn.CloseChan():
			f.cur.retired = true
			f.cur = nil
		default:
			return f.cur, nil
		}
	}
	rt, err := resolveForwardTarget(ctx, f.s.client, f.namespace, f.target)
	if err == nil {
		var conn httpstream.Connection
		if conn, err = dialPod(f.s, f.namespace, rt.pod); err == nil {
			f.cur = &podTunnel{pod: rt.pod, port: rt.port, conn: conn}
			f.lastErr = ""
			if f.lastPod == "" {
				scheme := "http://"
				if f.raw {
					scheme = ""
				}
				f.log.printf("%-6s %slocalhost:%d -> %s (pod %s)\n", f.name, scheme, f.local, f.target, rt.pod)
			} else if f.lastPod != rt.pod {
				f.log.printf("%-6s localhost:%d -> %s now goes to pod %s\n", f.name, f.local, f.target, rt.pod)
			}
			f.lastPod = rt.pod
			return f.cur, nil
		}
		err = fmt.Errorf("%s: connecting to pod %s: %w", f.target, rt.pod, err)
	}
	if msg := err.Error(); msg != f.lastErr {
		f.lastErr = msg
		f.log.printf("%-6s localhost:%d waiting: %s\n", f.name, f.local, boundedLine(msg, 400))
	}
	return nil, err
}

// retire stops new connections going to t, closing it once idle.
func (f *forwarder) retire(t *podTunnel) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cur == t {
		f.cur = nil
	}
	t.retired = true
	if t.active == 0 {
		t.conn.Close()
	}
}

func (f *forwarder) release(t *podTunnel) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t.active--
	if t.retired && t.active == 0 {
		t.conn.Close()
	}
}

// handle copies one local connection to the pod's port and back, as
// kubectl port-forward does: an error stream and a data stream per
// connection on the pod's connection.
func (f *forwarder) handle(ctx context.Context, local net.Conn) {
	defer local.Close()
	t, err := f.tunnel(ctx, true)
	if err != nil {
		return // said by tunnel; the client sees the connection closed
	}
	defer f.release(t)
	id := f.nextID.Add(1) // pairs the error and data streams at the kubelet

	headers := http.Header{}
	headers.Set(corev1.StreamType, corev1.StreamTypeError)
	headers.Set(corev1.PortHeader, strconv.Itoa(int(t.port)))
	headers.Set(corev1.PortForwardRequestIDHeader, strconv.FormatInt(id, 10))
	errStream, err := t.conn.CreateStream(headers)
	if err != nil {
		f.retire(t)
		return
	}
	errStream.Close() // nothing to write on it
	defer t.conn.RemoveStreams(errStream)
	errc := make(chan string, 1)
	go func() {
		msg, err := io.ReadAll(io.LimitReader(errStream, 4096))
		if err != nil && len(msg) == 0 {
			msg = []byte(err.Error())
		}
		errc <- string(msg)
	}()

	headers.Set(corev1.StreamType, corev1.StreamTypeData)
	data, err := t.conn.CreateStream(headers)
	if err != nil {
		f.retire(t)
		return
	}
	defer t.conn.RemoveStreams(data)
	remoteDone := make(chan struct{})
	localDone := make(chan struct{})
	go func() {
		_, _ = io.Copy(local, data)
		close(remoteDone)
	}()
	go func() {
		defer data.Close() // the pod's side sees the end of the request
		if _, err := io.Copy(data, local); err != nil {
			close(localDone)
		}
	}()
	select {
	case <-remoteDone:
	case <-localDone:
	case <-ctx.Done(): // Ctrl-C, or push --watch stopping
	}
	_ = data.Reset()
	var msg string
	select {
	case msg = <-errc:
	case <-ctx.Done(): // release closes the connection, which ends the read
	}
	if msg != "" {
		// The kubelet could not reach the port (the pod stopped, say):
		// the next connection resolves the target again.
		f.log.printf("%-6s localhost:%d pod %s: %s\n", f.name, f.local, t.pod, boundedLine(msg, 400))
		f.retire(t)
	}
}

// dialPod opens a port-forward connection to a pod through the API server
// as the user: WebSocket first, SPDY when the server cannot upgrade to it
// (what kubectl does).
func dialPod(s *session, ns, pod string) (httpstream.Connection, error) {
	u := s.clientset.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("portforward").URL()
	transport, upgrader, err := spdy.RoundTripperFor(s.config)
	if err != nil {
		return nil, err
	}
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	ws, err := portforward.NewSPDYOverWebsocketDialer(u, s.config)
	if err != nil {
		return nil, err
	}
	dialer = portforward.NewFallbackDialer(ws, dialer, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	conn, proto, err := dialer.Dial(portforward.PortForwardProtocolV1Name)
	if err != nil {
		return nil, err
	}
	if proto != portforward.PortForwardProtocolV1Name {
		conn.Close()
		return nil, fmt.Errorf("the API server speaks %q, not %q", proto, portforward.PortForwardProtocolV1Name)
	}
	return conn, nil
}

// boundedLine keeps a message from the cluster to one line of at most n
// bytes.
func boundedLine(s string, n int) string {
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

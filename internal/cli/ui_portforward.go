package cli

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/devloop-dev/devloop/internal/ui"
)

// uiForwarder starts the page's port-forwards with the forwarder of
// `kubectl devloop port-forward`, as the user, but on a free port of
// 127.0.0.1 rather than the declared components[].ports[].local: the
// declared one may be taken by a `port-forward` or `push --watch` already
// running, and the page shows the URL anyway.
type uiForwarder struct {
	u *uiActions
}

var _ ui.PortForwarder = uiForwarder{}

func (p uiForwarder) Forward(ctx context.Context, namespace, name, component, port string) (ui.Forward, error) {
	s := p.u.in(namespace)
	env, err := s.getEnv(ctx, name)
	if err != nil {
		return ui.Forward{}, err
	}
	var f *forwarder
	if strings.HasPrefix(port, "svc/") {
		// A Service port the page found (Endpoints), not a declared one.
		if f, err = p.u.endpointForwarder(ctx, s, env, component, port); err != nil {
			return ui.Forward{}, err
		}
	} else if fws, err := forwardsOf(env, []string{component}, ""); err != nil {
		return ui.Forward{}, err
	} else {
		for _, c := range fws {
			if c.name == port {
				f = c
			}
		}
	}
	if f == nil {
		return ui.Forward{}, fmt.Errorf("component %s of devenvironment/%s declares no port %q (components[].ports[].name)", component, name, port)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return ui.Forward{}, fmt.Errorf("port-forward %s of component %s: listening on 127.0.0.1: %w", port, component, err)
	}
	f.listeners = []net.Listener{l}
	f.local = int32(l.Addr().(*net.TCPAddr).Port)
	last := &lastForwardLine{}
	f.s, f.log, f.poll = s, &syncWriter{w: last}, max(p.u.a.opts.PollInterval, 200*time.Millisecond)
	// The forward outlives the request that started it: Stop ends it.
	fctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.run(fctx)
	}()
	return ui.Forward{
		Addr:   l.Addr().String(),
		Status: last.String,
		Stop: func() {
			cancel()
			<-done
		},
	}, nil
}

// lastForwardLine keeps the last line a forwarder printed (bounded), for the
// page to show next to the URL.
type lastForwardLine struct {
	mu   sync.Mutex
	line string
}

func (l *lastForwardLine) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := strings.TrimSpace(string(p)); s != "" {
		if i := strings.LastIndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		}
		l.line = boundedLine(s, 400)
	}
	return len(p), nil
}

// String is the last line without the forward's name and local address,
// which the page shows already: "waiting: ..." or "-> svc/web:80 (pod web-1)".
func (l *lastForwardLine) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	fields := strings.Fields(l.line)
	if len(fields) >= 2 && strings.Contains(fields[1], "localhost:") {
		fields = fields[2:]
	}
	return strings.Join(fields, " ")
}

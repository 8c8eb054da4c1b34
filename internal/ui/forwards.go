package ui

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// MaxForwards bounds the port-forwards the page may hold open at once:
// each is a listener and, once used, a connection through the API server.
const MaxForwards = 8

// PortForwarder starts the port-forward of one declared port
// (spec.components[].ports[]) as the user. The forward must outlive ctx
// (ctx bounds only the start) and run until Forward.Stop is called.
type PortForwarder interface {
	Forward(ctx context.Context, namespace, env, component, port string) (Forward, error)
}

// Forward is a running port-forward.
type Forward struct {
	// Addr is where it listens: 127.0.0.1:PORT.
	Addr string
	// Status is what the forward last said (waiting for a pod, which pod
	// it forwards to); nil when it says nothing.
	Status func() string
	// Stop ends it and waits until the local port is closed.
	Stop func()
}

// ForwardInfo is a running forward as the page shows it.
type ForwardInfo struct {
	Namespace string `json:"namespace"`
	Env       string `json:"env"`
	Component string `json:"component"`
	Port      string `json:"port"`
	Addr      string `json:"addr"`
	URL       string `json:"url"`
	Status    string `json:"status,omitempty"`
}

// Forwards are the port-forwards started from the page: at most max at
// once, one per declared port, all stopped by Close (when the server
// stops).
type Forwards struct {
	f   PortForwarder
	max int

	mu     sync.Mutex
	active map[string]*running
	closed bool
}

type running struct {
	info ForwardInfo
	fw   Forward
}

// NewForwards keeps at most max forwards of f (MaxForwards if max <= 0).
func NewForwards(f PortForwarder, max int) *Forwards {
	if max <= 0 {
		max = MaxForwards
	}
	return &Forwards{f: f, max: max, active: map[string]*running{}}
}

func forwardKey(namespace, env, component, port string) string {
	return namespace + "/" + env + "/" + component + "/" + port
}

// Start starts the forward of the port, or returns the one already
// running (a second click shows the same URL, not a second listener).
func (fs *Forwards) Start(ctx context.Context, namespace, env, component, port string) (ForwardInfo, error) {
	key := forwardKey(namespace, env, component, port)
	// Held across the start so that the bound holds and two clicks do not
	// both start; a start is bounded by ctx.
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.closed {
		return ForwardInfo{}, errors.New("the dashboard is stopping")
	}
	if r, ok := fs.active[key]; ok {
		return r.snapshot(), nil
	}
	if len(fs.active) >= fs.max {
		return ForwardInfo{}, fmt.Errorf("%d port-forwards are running, the most the dashboard keeps at once: stop one first", len(fs.active))
	}
	fw, err := fs.f.Forward(ctx, namespace, env, component, port)
	if err != nil {
		return ForwardInfo{}, err
	}
	r := &running{fw: fw, info: ForwardInfo{Namespace: namespace, Env: env, Component: component, Port: port,
		Addr: fw.Addr, URL: "http://" + fw.Addr + "/"}}
	fs.active[key] = r
	return r.snapshot(), nil
}

// Stop stops the forward of the port; stopping one not running is no
// error (a retried click).
func (fs *Forwards) Stop(namespace, env, component, port string) bool {
	key := forwardKey(namespace, env, component, port)
	fs.mu.Lock()
	r, ok := fs.active[key]
	delete(fs.active, key)
	fs.mu.Unlock()
	if ok {
		r.fw.Stop()
	}
	return ok
}

// List is the running forwards, sorted.
func (fs *Forwards) List() []ForwardInfo {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	out := make([]ForwardInfo, 0, len(fs.active))
	for _, r := range fs.active {
		out = append(out, r.snapshot())
	}
	slices.SortFunc(out, func(a, b ForwardInfo) int {
		return strings.Compare(forwardKey(a.Namespace, a.Env, a.Component, a.Port), forwardKey(b.Namespace, b.Env, b.Component, b.Port))
	})
	return out
}

// Close stops every forward and refuses new ones.
func (fs *Forwards) Close() {
	fs.mu.Lock()
	fs.closed = true
	all := fs.active
	fs.active = map[string]*running{}
	fs.mu.Unlock()
	var wg sync.WaitGroup
	for _, r := range all {
		wg.Go(r.fw.Stop)
	}
	wg.Wait()
}

func (r *running) snapshot() ForwardInfo {
	info := r.info
	if r.fw.Status != nil {
		info.Status = bounded(r.fw.Status(), 300)
	}
	return info
}

// Endpoint is a Service port in front of a component's pods, offered for
// a port-forward though the spec declares no port for it; ID
// (svc/NAME:PORT) is what the page passes as the forward's port.
type Endpoint struct {
	ID        string `json:"id"`
	Namespace string `json:"namespace"`
	Service   string `json:"service"`
	Port      int32  `json:"port"`
	Name      string `json:"name,omitempty"`
}

// Package registryproxy relays a port on every node to the bundled
// registry's Service. A kubelet pulls an image by an address of its own
// node (it resolves no Service name), and a hostPort is bound only on the
// node whose pod declares it: with the registry pod's hostPort alone, a pod
// on any other node could not pull from localhost:<hostPort>. The chart's
// node proxy (registry.nodeProxy) runs Relay on every node instead.
//
// It relays bytes, not HTTP: the registry's front sees the Host the node
// called and points token requests back at the same address, so
// authentication works through it unchanged.
package registryproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Relay accepts connections and relays each, both ways, to Target.
type Relay struct {
	// Target is the registry's address, host:port (its Service's name: a
	// pod resolves it through the cluster's DNS).
	Target string
	// DialTimeout bounds a connection to Target; 0 means 10 s.
	DialTimeout time.Duration
	// MaxConns bounds the connections relayed at once; 0 means 256. At
	// the bound, Accept waits: a flood queues in the listener's backlog
	// rather than costing the node a goroutine and a socket each.
	MaxConns int
	// Logf, when set, is told of each connection that failed.
	Logf func(format string, args ...any)
}

// Serve relays every connection ln accepts until ctx ends, then closes ln
// and waits for the relayed connections to finish.
func (r *Relay) Serve(ctx context.Context, ln net.Listener) error {
	maxConns := r.MaxConns
	if maxConns <= 0 {
		maxConns = 256
	}
	slots := make(chan struct{}, maxConns)
	var wg sync.WaitGroup
	stop := context.AfterFunc(ctx, func() { _ = ln.Close() })
	defer stop()
	defer wg.Wait()
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		c, err := ln.Accept()
		if err != nil {
			<-slots
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("accept: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			if err := r.relay(ctx, c); err != nil && r.Logf != nil {
				r.Logf("relay %s -> %s: %v", c.RemoteAddr(), r.Target, err)
			}
		}()
	}
}

// relay copies c to a new connection to Target and back, each direction
// half-closed when its source ends, until both have ended or ctx does.
func (r *Relay) relay(ctx context.Context, c net.Conn) error {
	defer c.Close()
	timeout := r.DialTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	d := net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	up, err := d.DialContext(ctx, "tcp", r.Target)
	if err != nil {
		return err
	}
	defer up.Close()
	stop := context.AfterFunc(ctx, func() {
		_ = c.Close()
		_ = up.Close()
	})
	defer stop()
	errs := make(chan error, 2)
	go func() { errs <- pipe(up, c) }()
	go func() { errs <- pipe(c, up) }()
	first := <-errs
	second := <-errs
	return errors.Join(first, second)
}

// pipe copies src to dst, then closes dst's writing half so the far end
// sees the end of what src sent (a client that half-closes after its
// request still reads the whole response).
func pipe(dst, src net.Conn) error {
	_, err := io.Copy(dst, src)
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	} else {
		_ = dst.Close()
	}
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

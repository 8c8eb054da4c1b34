package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"strings"
	"sync"
	"time"
)

// This kernel has no delay qdisc (netem), so the link's round-trip delay
// is added here, in user space, on the path from the laptop's namespace
// to the cluster: each chunk read from one side is written to the other
// half a round trip after it was read. Chunks are queued, not held one at
// a time, so the delay adds latency without cutting throughput (a bulk
// upload still fills the rate limit that tc puts on the veth).

// route is one proxied service: listen on from, forward to to.
type route struct{ from, to string }

// parseRoutes reads "LISTEN=TARGET,LISTEN=TARGET".
func parseRoutes(s string) ([]route, error) {
	var out []route
	for _, part := range strings.Split(s, ",") {
		from, to, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || from == "" || to == "" {
			return nil, fmt.Errorf("route %q: want LISTEN=TARGET", part)
		}
		out = append(out, route{from, to})
	}
	return out, nil
}

// delayProxy forwards connections on each route, each direction delayed by
// oneWay.
type delayProxy struct {
	oneWay time.Duration
}

// serve listens on every route and forwards until ctx ends.
func (p *delayProxy) serve(ctx context.Context, routes []route) error {
	var listeners []net.Listener
	for _, r := range routes {
		l, err := net.Listen("tcp", r.from)
		if err != nil {
			for _, l := range listeners {
				l.Close()
			}
			return err
		}
		listeners = append(listeners, l)
	}
	var wg sync.WaitGroup
	for i, l := range listeners {
		wg.Add(1)
		go func(l net.Listener, to string) {
			defer wg.Done()
			p.accept(l, to)
		}(l, routes[i].to)
	}
	<-ctx.Done()
	for _, l := range listeners {
		l.Close()
	}
	wg.Wait()
	return nil
}

func (p *delayProxy) accept(l net.Listener, to string) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go p.forward(c, to)
	}
}

// forward joins c to a new connection to target, both ways delayed.
func (p *delayProxy) forward(c net.Conn, target string) {
	defer c.Close()
	// Dialling costs the laptop a round trip on a real link: the SYN
	// goes out and the SYN-ACK comes back.
	time.Sleep(2 * p.oneWay)
	t, err := net.DialTimeout("tcp", target, 10*time.Second)
	if err != nil {
		log.Printf("dial %s: %v", target, err)
		return
	}
	defer t.Close()
	done := make(chan struct{}, 2)
	go func() { delayedCopy(t, c, p.oneWay); done <- struct{}{} }()
	go func() { delayedCopy(c, t, p.oneWay); done <- struct{}{} }()
	<-done
	<-done
}

// chunk is what was read, and when it may be written.
type chunk struct {
	data []byte
	due  time.Time
}

// delayedCopy copies src to dst, each chunk written delay after it was
// read; at src's end it closes dst's write side, so a half-close crosses.
func delayedCopy(dst, src net.Conn, delay time.Duration) {
	queue := make(chan chunk, 4096)
	written := make(chan struct{})
	go func() {
		defer close(written)
		for c := range queue {
			if wait := time.Until(c.due); wait > 0 {
				time.Sleep(wait)
			}
			if _, err := dst.Write(c.data); err != nil {
				for range queue {
				}
				return
			}
		}
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
	}()
	for {
		buf := make([]byte, 32<<10)
		n, err := src.Read(buf)
		if n > 0 {
			queue <- chunk{data: buf[:n], due: time.Now().Add(delay)}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				log.Printf("read: %v", err)
			}
			break
		}
	}
	close(queue)
	<-written
}

package registryproxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/devloop-dev/devloop/internal/testregistry"
)

// startRelay serves a Relay to target on a free loopback port until the
// test ends, and returns its address and the error Serve returned.
func startRelay(t *testing.T, r *Relay) (string, <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return 10 s after its context ended")
		}
	})
	return ln.Addr().String(), done
}

// A node pushes and pulls through the relay as it would through the
// registry itself: the real distribution registry behind it holds what was
// pushed, under the same digest.
func TestRelayCarriesPushAndPullToTheRegistry(t *testing.T) {
	reg := testregistry.Start(t)
	addr, _ := startRelay(t, &Relay{Target: reg})

	img, err := random.Image(1<<20, 3)
	if err != nil {
		t.Fatal(err)
	}
	want, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	via, err := name.ParseReference(addr+"/team-a/app:dev", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(via, img); err != nil {
		t.Fatalf("push through the relay: %v", err)
	}
	pulled, err := remote.Image(via)
	if err != nil {
		t.Fatalf("pull through the relay: %v", err)
	}
	if got, _ := pulled.Digest(); got != want {
		t.Errorf("pulled %s through the relay, pushed %s", got, want)
	}
	layers, err := pulled.Layers()
	if err != nil || len(layers) != 3 {
		t.Fatalf("layers through the relay: %d, %v", len(layers), err)
	}
	for _, l := range layers {
		rc, err := l.Compressed()
		if err != nil {
			t.Fatal(err)
		}
		// Reading the blob checks its digest: every byte came through.
		if _, err := io.Copy(io.Discard, rc); err != nil {
			t.Errorf("layer through the relay: %v", err)
		}
		rc.Close()
	}
	direct, err := name.ParseReference(reg+"/team-a/app:dev", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	d, err := remote.Head(direct)
	if err != nil {
		t.Fatalf("the registry itself: %v", err)
	}
	if d.Digest != want {
		t.Errorf("the registry holds %s, pushed %s", d.Digest, want)
	}
}

// upstream is a TCP server that reads each connection to its end and then
// answers with what it read, upper-cased: it answers only after the client
// half-closed, as a client that sends a request and then shuts its
// writing side expects.
func upstream(t *testing.T) (addr string, accepted func() int) {
	t.Helper()
	return upstreamAt(t, "127.0.0.1:0")
}

// upstreamAt is upstream on a given address.
func upstreamAt(t *testing.T, at string) (addr string, accepted func() int) {
	t.Helper()
	ln, err := net.Listen("tcp", at)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var mu sync.Mutex
	n := 0
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			n++
			mu.Unlock()
			go func() {
				defer c.Close()
				b, _ := io.ReadAll(c)
				_, _ = c.Write([]byte(strings.ToUpper(string(b))))
			}()
		}
	}()
	return ln.Addr().String(), func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// askVia sends msg through addr, half-closes, and returns the answer.
func askVia(t *testing.T, addr, msg string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// (A relay that could not reach its target may have closed c
	// already: the answer, empty, says so.)
	_, _ = c.Write([]byte(msg))
	_ = c.(*net.TCPConn).CloseWrite()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("answer through the relay: %v", err)
	}
	return string(b)
}

// The end of what one side sent reaches the other (a half-close), while
// the answer still comes back.
func TestRelayPassesAHalfCloseOn(t *testing.T) {
	target, _ := upstream(t)
	addr, _ := startRelay(t, &Relay{Target: target})
	if got := askVia(t, addr, "get /v2/"); got != "GET /V2/" {
		t.Errorf("answer %q, want %q", got, "GET /V2/")
	}
}

// At MaxConns the relay takes no further connection until one ends; the
// waiting one is then relayed, nothing lost.
func TestRelayHoldsConnectionsBeyondItsBound(t *testing.T) {
	target, accepted := upstream(t)
	addr, _ := startRelay(t, &Relay{Target: target, MaxConns: 1})

	first, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for accepted() < 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if accepted() != 1 {
		t.Fatalf("upstream accepted %d connections, want the first relayed", accepted())
	}
	second, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if _, err := second.Write([]byte("second")); err != nil {
		t.Fatal(err)
	}
	_ = second.(*net.TCPConn).CloseWrite()
	// Without the bound the answer comes back in a millisecond or two.
	_ = second.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if b, err := bufio.NewReader(second).ReadString(0); err == nil || len(b) > 0 || accepted() != 1 {
		t.Fatalf("the second connection was relayed beside the first (read %q, %v; upstream accepted %d)", b, err, accepted())
	}
	first.Close()
	_ = second.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(second)
	if err != nil || string(b) != "SECOND" {
		t.Fatalf("after the first ended, the second got %q, %v; want %q", b, err, "SECOND")
	}
}

// A target that cannot be reached closes the node's connection at once
// and says why; the relay goes on serving.
func TestRelayClosesWhatItCannotReach(t *testing.T) {
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := dead.Addr().String()
	dead.Close()
	var mu sync.Mutex
	var logged []string
	addr, _ := startRelay(t, &Relay{Target: target, Logf: func(f string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		logged = append(logged, f)
	}})
	if got := askVia(t, addr, "hello"); got != "" {
		t.Errorf("answer %q from a target that is down", got)
	}
	// The failure is logged once the relay has closed the connection.
	n := 0
	for deadline := time.Now().Add(10 * time.Second); n == 0 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		mu.Lock()
		n = len(logged)
		mu.Unlock()
	}
	if n != 1 {
		t.Errorf("%d failures logged, want 1", n)
	}
	// The relay still serves: the target, back on its address, is reached.
	upstreamAt(t, target)
	if got := askVia(t, addr, "again"); got != "AGAIN" {
		t.Errorf("answer %q, want AGAIN", got)
	}
}

// Serve returns when its context ends, with the listener closed.
func TestRelayStopsWithItsContext(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- (&Relay{Target: "127.0.0.1:1"}).Serve(ctx, ln) }()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve returned %v after its context ended, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	if _, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		t.Error("the listener still accepts after Serve returned")
	}
}

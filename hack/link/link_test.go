package main

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/devloop-dev/devloop/internal/testregistry"
)

// TestProxyAddsTheRoundTripAndKeepsTheBytes runs the check the benchmark
// runs before it measures, against a real registry behind the delay
// proxy: a request on an open connection takes at least the round trip
// the proxy adds, and a blob pushed through it is accepted by its digest
// (the registry checks it) and read back whole. The rates are printed:
// the proxy adds no limit of its own (tc does that on the link).
func TestProxyAddsTheRoundTripAndKeepsTheBytes(t *testing.T) {
	registry := testregistry.Start(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	front := l.Addr().String()
	l.Close()

	const rtt = 60 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- (&delayProxy{oneWay: rtt / 2}).serve(ctx, []route{{front, registry}}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Error(err)
		}
	})
	var f linkFigures
	deadline := time.Now().Add(time.Minute)
	for {
		f, err = measureLink(context.Background(), front, "check/blob", 2<<20)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond) // the proxy is not listening yet
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Log(f)
	if f.rtt < rtt {
		t.Errorf("a request through the proxy took %s: less than the %s round trip it adds", f.rtt, rtt)
	}
	if f.upMbit <= 0 || f.downMbit <= 0 {
		t.Errorf("no rate measured: %v", f)
	}

	direct, err := measureLink(context.Background(), registry, "check/blob", 2<<20)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("without the proxy: %v", direct)
}

func TestParseRoutes(t *testing.T) {
	rs, err := parseRoutes("10.251.0.1:16443=10.250.0.1:6443, 10.251.0.1:15000=10.250.0.1:5000")
	if err != nil || len(rs) != 2 || rs[1] != (route{"10.251.0.1:15000", "10.250.0.1:5000"}) {
		t.Fatalf("routes %v, %v", rs, err)
	}
	for _, bad := range []string{"", "a", "a=", "=b", "a=b,c"} {
		if _, err := parseRoutes(bad); err == nil {
			t.Errorf("parseRoutes(%q) accepted", bad)
		}
	}
}

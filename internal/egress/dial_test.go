package egress

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/devloop-dev/devloop/internal/fault"
)

// counting is an httptest server that counts the requests it receives.
func counting(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if h != nil {
			h(w, r)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func denyLoopback(t *testing.T, allowHosts ...string) *Policy {
	return mustNew(t, Config{DenyCIDRs: []string{"127.0.0.0/8", "::1/128"}, AllowHosts: allowHosts})
}

func assertRefused(t *testing.T, err error, want string) {
	t.Helper()
	var re *RefusedError
	if !errors.As(err, &re) {
		t.Fatalf("err %v, want an egress refusal", err)
	}
	if !fault.IsPermanent(err) {
		t.Errorf("err %v is not permanent: a refusal must stall, not retry", err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("err %q, want it to contain %q", err, want)
	}
}

func TestClientRefusesDeniedAddressBeforeAnyRequest(t *testing.T) {
	srv, hits := counting(t, nil)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	p := denyLoopback(t)
	for _, u := range []string{
		srv.URL + "/index.yaml",                    // a literal denied address
		"http://localhost:" + port + "/index.yaml", // a name resolving to one
	} {
		_, err := p.Client(0).Get(u)
		assertRefused(t, err, "egress policy refuses 127.0.0.1 (--egress-deny-cidr 127.0.0.0/8) for "+u)
		if strings.Contains(u, "localhost") {
			// Dialled by name: the refusal is of the resolved address.
			if !strings.Contains(err.Error(), "localhost") {
				t.Errorf("err %q should name the URL", err)
			}
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the denied server received %d requests", n)
	}
	// The same server is reachable without the deny.
	resp, err := Default().Client(0).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

func TestRedirectToDeniedAddressIsRefused(t *testing.T) {
	denied, deniedHits := counting(t, nil)
	_, deniedPort, _ := net.SplitHostPort(strings.TrimPrefix(denied.URL, "http://"))
	target := "http://localhost:" + deniedPort + "/chart.tgz"
	allowed, allowedHits := counting(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target, http.StatusFound)
	})
	// The allowed server is on loopback too, allowed by its host:port.
	p := denyLoopback(t, strings.TrimPrefix(allowed.URL, "http://"))
	_, err := p.Client(0).Get(allowed.URL + "/index.yaml")
	assertRefused(t, err, "for "+target)
	if allowedHits.Load() != 1 || deniedHits.Load() != 0 {
		t.Errorf("allowed server got %d requests (want 1), denied server %d (want 0)", allowedHits.Load(), deniedHits.Load())
	}
}

func TestRedirectsAreCapped(t *testing.T) {
	var srv *httptest.Server
	srv, hits := counting(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, srv.URL+r.URL.Path+"x", http.StatusFound)
	})
	_, err := Default().Client(0).Get(srv.URL + "/")
	if err == nil || !strings.Contains(err.Error(), "redirects") {
		t.Fatalf("err %v, want the redirect cap", err)
	}
	if n := hits.Load(); n != MaxRedirects+1 {
		t.Errorf("%d requests, want %d", n, MaxRedirects+1)
	}
	req := func(u string) *http.Request { r, _ := http.NewRequest(http.MethodGet, u, nil); return r }
	if err := CheckRedirect(req("http://a/"), []*http.Request{req("https://a/")}); err == nil {
		t.Error("a redirect from https to http must be refused")
	}
}

func TestTransportHasTimeouts(t *testing.T) {
	rt, ok := Default().Transport().(*roundTripper)
	if !ok {
		t.Fatalf("transport %T", Default().Transport())
	}
	if rt.next.TLSHandshakeTimeout == 0 || rt.next.ResponseHeaderTimeout == 0 || rt.next.DialContext == nil {
		t.Errorf("transport without timeouts: %+v", rt.next)
	}
	if c := Default().Client(0); c.CheckRedirect == nil {
		t.Error("client without a redirect cap")
	}
}

func TestContextTransportUsesTheContextsPolicy(t *testing.T) {
	srv, hits := counting(t, nil)
	c := &http.Client{Transport: ContextTransport}
	req, _ := http.NewRequestWithContext(WithPolicy(context.Background(), denyLoopback(t)), http.MethodGet, srv.URL, nil)
	_, err := c.Do(req)
	assertRefused(t, err, "127.0.0.1")
	if hits.Load() != 0 {
		t.Fatal("request sent despite the policy")
	}
	// No policy in the context: sent.
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

func TestDialRefusesDeniedAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	_, err = denyLoopback(t).DialContext(context.Background(), "tcp", ln.Addr().String())
	assertRefused(t, err, "egress policy refuses 127.0.0.1")
	var op *net.OpError
	if errors.As(err, &op) {
		t.Errorf("a refusal must not look like a network failure: %v", err)
	}
	if accepted.Load() != 0 {
		t.Error("a connection was accepted")
	}
}

func TestSSHChecks(t *testing.T) {
	p := denyLoopback(t)
	if err := p.CheckResolved(context.Background(), "localhost:22"); err == nil {
		t.Error("localhost resolves to a denied address")
	}
	if err := Default().CheckResolved(context.Background(), "localhost:22"); err != nil {
		t.Error(err)
	}
	called := false
	cb := p.HostKeyCallback(func(string, net.Addr, ssh.PublicKey) error { called = true; return nil })
	err := cb("git.example:22", &net.TCPAddr{IP: net.ParseIP("169.254.169.254"), Port: 22}, nil)
	assertRefused(t, err, "169.254.169.254 (link-local)")
	if called {
		t.Error("the host key was checked after the refusal")
	}
	if err := cb("git.example:22", &net.TCPAddr{IP: net.ParseIP("192.0.2.1"), Port: 22}, nil); err != nil || !called {
		t.Errorf("allowed address: %v, next called %v", err, called)
	}
}

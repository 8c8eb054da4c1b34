package teamcache

import (
	"context"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/kubernetes"

	"github.com/devloop-dev/devloop/internal/httpserve"
	"github.com/devloop-dev/devloop/internal/reviewguard/reviewguardtest"
)

// countingReviews is the operator's connection (the chart's ClusterRole)
// as cmd/manager makes it for reviews, counting the TokenReviews it sends.
func countingReviews(t *testing.T) (kubernetes.Interface, *atomic.Int64) {
	t.Helper()
	return reviewguardtest.CountingReviews(t, operatorCfg)
}

// startListener runs the service as cmd/manager does (Listener) on a
// free loopback port and returns its base URL and a client for it.
func startListener(t *testing.T, s *Server) (string, *http.Client) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	if err := (Listener{Addr: addr, Server: s}).Start(context.Background()); err == nil {
		t.Fatal("a listener without a certificate started")
	}
	serving, ca, err := httpserve.SelfSigned("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- (Listener{Addr: addr, Server: s, TLS: serving}).Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	clientTLS, err := httpserve.ClientTLS(ca)
	if err != nil {
		t.Fatal(err)
	}
	waitListening(t, addr)
	return "https://" + addr, &http.Client{Transport: &http.Transport{TLSClientConfig: clientTLS}}
}

func waitListening(t *testing.T, addr string) {
	t.Helper()
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return
		}
		if i > 10000 {
			t.Fatalf("the listener on %s never listened: %v", addr, err)
		}
	}
}

// Requests with a token the API server refused are answered from memory
// (the flood: 1,306 requests, 2,797 TokenReviews), a source
// trying ever new tokens is answered 429 past its share of reviews, and
// a builder pod of a tenant is served meanwhile.
func TestCacheBoundsTokenReviews(t *testing.T) {
	cs, reviews := countingReviews(t)
	s, _ := newService(t)
	s.Reviewer = NewKubeReviewer(cs)
	url, hc := startListener(t, s)
	a := newTenantEnvAt(t, "amplify-a-", url, hc)

	// The tenant's pod is served (and known from then on).
	if _, _, miss, err := a.client.Get(context.Background(), make([]byte, IDLen), &strings.Builder{}); err != nil || !miss {
		t.Fatalf("the tenant's builder pod: miss %v, %v; want a miss", miss, err)
	}

	action := strings.Repeat("ab", 32)
	get := func(token string) reviewguardtest.Answer {
		r, _ := http.NewRequest(http.MethodGet, url+actionsPath+action, nil)
		r.Header.Set("Authorization", "Bearer "+token)
		resp, err := hc.Do(r)
		if err != nil {
			return reviewguardtest.Answer{Err: err}
		}
		resp.Body.Close()
		return reviewguardtest.Answer{Code: resp.StatusCode, RetryAfter: resp.Header.Get("Retry-After")}
	}
	reviewguardtest.ExpectRefusalsRemembered(t, get, reviews)
	limited := reviewguardtest.ExpectSourceLimited(t, get, false)
	t.Logf("%d TokenReviews sent in all, %d requests answered 429", reviews.Load(), limited)
}

// The service answers only TLS: a builder pod's bearer (a write
// credential of its environment's store) sent in clear reaches no
// handler, and the same pod over TLS, trusting the CA it was given, is
// served.
func TestCacheAnswersOnlyTLS(t *testing.T) {
	s, _ := newService(t)
	url, hc := startListener(t, s)
	a := newTenantEnvAt(t, "tls-a-", url, hc)
	token, err := os.ReadFile(a.client.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := http.NewRequest(http.MethodGet, "http://"+strings.TrimPrefix(url, "https://")+actionsPath+strings.Repeat("ab", 32), nil)
	r.Header.Set("Authorization", "Bearer "+string(token))
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || resp.Header.Get(HeaderOutputID) != "" {
		t.Errorf("plain HTTP: %d, want the TLS layer's 400", resp.StatusCode)
	}
	if _, _, miss, err := a.client.Get(context.Background(), make([]byte, IDLen), &strings.Builder{}); err != nil || !miss {
		t.Errorf("over TLS: miss %v, %v; want a miss", miss, err)
	}
}

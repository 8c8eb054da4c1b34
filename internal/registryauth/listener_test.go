package registryauth

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/go-logr/logr/testr"

	"github.com/devloop-dev/devloop/internal/httpserve"
)

// The token service as cmd/manager runs it answers only TLS: a plain HTTP
// request (a Kubernetes token in clear) reaches no handler and gets no
// token, whatever it carries; over TLS, with the certificate trusted, the
// same token is reviewed and granted. Without a certificate it does not
// start.
func TestTokenListenerAnswersOnlyTLS(t *testing.T) {
	a := newTenant(t, "tls-")
	signer, _ := testSigner(t)
	serving, ca, err := httpserve.SelfSigned("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	handler := &Server{Reviewer: KubeReviewer{Client: operatorCS}, Signer: signer,
		Service: DefaultService, Issuer: DefaultIssuer, Audience: DefaultAudience, Log: testr.New(t)}
	if err := (Listener{Addr: addr, Handler: handler}).Start(context.Background()); err == nil {
		t.Fatal("a listener without a certificate started")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- (Listener{Addr: addr, Handler: handler, TLS: serving}).Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
	}
	clientTLS, err := httpserve.ClientTLS(ca)
	if err != nil {
		t.Fatal(err)
	}
	ask := func(hc *http.Client, scheme string) (int, string) {
		r, _ := http.NewRequest(http.MethodGet, scheme+"://"+addr+"/token?service="+DefaultService+"&scope=repository:"+a.ns+"/app:pull", nil)
		r.SetBasicAuth("k8s", a.builderRegistryToken)
		resp, err := hc.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return resp.StatusCode, string(body)
	}
	code, body := ask(http.DefaultClient, "http")
	if code != http.StatusBadRequest || strings.Contains(body, "token") {
		t.Errorf("plain HTTP: %d %q, want the TLS layer's 400 and no token", code, body)
	}
	code, body = ask(&http.Client{Transport: &http.Transport{TLSClientConfig: clientTLS}}, "https")
	if code != http.StatusOK || !strings.Contains(body, `"token"`) {
		t.Errorf("TLS: %d %q, want a token", code, body)
	}
}

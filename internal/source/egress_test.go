package source

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/egress"
)

// denyLoopback stands in for a cluster range: the test servers listen on
// 127.0.0.1.
func denyLoopback(t *testing.T, allowHosts ...string) *egress.Policy {
	t.Helper()
	p, err := egress.New(egress.Config{DenyCIDRs: []string{"127.0.0.0/8", "::1/128"}, AllowHosts: allowHosts})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Every outbound client of the Fetcher goes through its egress policy: a
// git, OCI or artifact URL whose host is a denied address is refused as a
// permanent error naming the source and the address, and the server
// receives nothing.
func TestEgressPolicyRefusesDeniedSources(t *testing.T) {
	ctx := context.Background()

	t.Run("git over HTTP", func(t *testing.T) {
		r := newGitRepo(t)
		url, requests := gitHTTPServer(t, r.dir, "", "")
		f := newFetcher(t)
		f.Egress = denyLoopback(t)
		_, err := f.Resolve(ctx, testNamespace, gitSource(url, &v1alpha1.GitRef{Branch: "main"}))
		expectError(t, err, permanent, []string{`source "app"`, "egress policy refuses 127.0.0.1 (--egress-deny-cidr 127.0.0.0/8)", url})
		_, err = f.Fetch(ctx, Ref{Source: "app", Kind: KindGit, URL: url, Commit: r.c1}, nil)
		expectError(t, err, permanent, []string{"egress policy refuses 127.0.0.1"})
		if n := requests.n.Load(); n != 0 {
			t.Errorf("the git server received %d requests", n)
		}
	})

	t.Run("git over SSH", func(t *testing.T) {
		r := newGitRepo(t)
		hostKey, _ := newKey(t)
		client, clientPEM := newKey(t)
		addr := sshGitServer(t, hostKey, client.PublicKey())
		knownHosts := knownhosts.Line([]string{knownhosts.Normalize(addr)}, hostKey.PublicKey()) + "\n"
		f := newFetcher(t, secret("ssh", map[string]string{"identity": string(clientPEM), "known_hosts": knownHosts}))
		f.Egress = denyLoopback(t)
		src := gitSource("ssh://git@"+addr+r.dir, &v1alpha1.GitRef{Branch: "dev"})
		src.Git.SecretRef = &v1alpha1.LocalObjectReference{Name: "ssh"}
		_, err := f.Resolve(ctx, testNamespace, src)
		expectError(t, err, permanent, []string{`source "app": git ssh://`, "egress policy refuses 127.0.0.1 (--egress-deny-cidr 127.0.0.0/8) for " + addr})
		// Allowed by name, it is reached.
		f.Egress = denyLoopback(t, addr)
		if _, err := f.Resolve(ctx, testNamespace, src); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("OCI", func(t *testing.T) {
		reg := newOCIRegistry(t, []byte("layer"))
		before := reg.requests.n.Load()
		f := newFetcher(t)
		f.Egress = denyLoopback(t)
		_, err := f.Resolve(ctx, testNamespace, ociSource(reg.repo, "dev", "", true))
		expectError(t, err, permanent, []string{`source "local"`, "egress policy refuses 127.0.0.1"})
		if n := reg.requests.n.Load() - before; n != 0 {
			t.Errorf("the registry received %d requests", n)
		}
	})

	t.Run("artifact redirected to a denied address", func(t *testing.T) {
		denied := &counting{h: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("secret")) })}
		deniedSrv := httptest.NewServer(denied)
		t.Cleanup(deniedSrv.Close)
		_, port, _ := splitHostPort(deniedSrv.URL)
		target := "http://localhost:" + port + "/latest/meta-data"
		front := httptest.NewServer(http.RedirectHandler(target, http.StatusFound))
		t.Cleanup(front.Close)
		f := newFetcher(t)
		f.Egress = denyLoopback(t, hostOf(front)) // the first server is allowed
		_, err := f.Fetch(ctx, Ref{Source: "flux", Kind: KindArtifact, URL: front.URL + "/a.tar.gz", Digest: "sha256:" + zeros64}, nil)
		expectError(t, err, permanent, []string{`source "flux"`, "egress policy refuses", target})
		if n := denied.n.Load(); n != 0 {
			t.Errorf("the redirect target received %d requests", n)
		}
	})
}

const zeros64 = "0000000000000000000000000000000000000000000000000000000000000000"

func splitHostPort(u string) (string, string, error) {
	srv := &httptest.Server{URL: u}
	h := hostOf(srv)
	for i := len(h) - 1; i >= 0; i-- {
		if h[i] == ':' {
			return h[:i], h[i+1:], nil
		}
	}
	return h, "", nil
}

package cli

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"

	"github.com/devloop-dev/devloop/internal/source"
)

// The keychain asks a registry whether it wants devloop tokens once per
// push, however many requests the push makes (each resolves the keychain).
func TestPushKeychainAsksTheRegistryOnce(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir()) // no credentials of this machine's
	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v2/" {
			asked.Add(1)
		}
		w.Header().Set("Www-Authenticate", `Bearer realm="http://`+r.Host+`/token",service="`+registryAudience+`"`)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer srv.Close()
	repo, err := name.NewRepository(strings.TrimPrefix(srv.URL, "http://")+"/team/src", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	k := &pushKeychain{namespace: "team", sa: "deployer", insecure: true}
	for i := range 3 {
		a, err := k.Resolve(repo)
		if err != nil {
			t.Fatal(err)
		}
		if a == authn.Anonymous {
			t.Fatalf("resolve %d: anonymous for a registry that asks for devloop tokens", i)
		}
	}
	if n := asked.Load(); n != 1 {
		t.Fatalf("the registry was asked %d times in one push, want 1", n)
	}
}

// TestTheRegistryIsAskedWhileThePushPacks: warmRegistry, called before
// the directory is packed, asks the registry whether it wants devloop
// tokens on its own, so the upload that follows finds the answer (issue
// 46: a round trip less before the upload); the push's own resolve asks
// nothing more.
func TestTheRegistryIsAskedWhileThePushPacks(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v2/" {
			asked.Add(1)
		}
		w.Header().Set("Www-Authenticate", `Bearer realm="http://`+r.Host+`/token",service="`+registryAudience+`"`)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	k := &pushKeychain{namespace: "team", sa: "deployer", insecure: true}
	tgt := &pushTarget{ref: host + "/team/src:dev", insecure: true, pusherOpts: source.PushOptions{Insecure: true, Keychain: k}}
	tgt.warmRegistry()
	waitUntil(t, "the registry asked before any push", func() bool { return asked.Load() == 1 })

	repo, err := name.NewRepository(host+"/team/src", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if a, err := k.Resolve(repo); err != nil || a == authn.Anonymous {
		t.Fatalf("the push's resolve: %v, %v; want the devloop token's authenticator", a, err)
	}
	if n := asked.Load(); n != 1 {
		t.Fatalf("the registry was asked %d times, want 1: the push took warmRegistry's answer", n)
	}
}

//go:build e2e

package e2e

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/devloop-dev/devloop/internal/build"
)

// nodeAddress is the node's address, where pods reach the host (the
// registry listens there too).
var nodeAddress, _, _ = strings.Cut(registry, ":")

// delveGoProxy serves this machine's Go module download cache as a
// GOPROXY on the node's address, for builder pods: their network reaches
// the host but not the Internet (the pod bridge has no masquerade), and a
// debug build go-installs delve. The host's own `go install` of the same
// delve fills the cache first (and proves it builds here). It returns the
// GOPROXY URL; the server stops with the test.
func delveGoProxy(t *testing.T) string {
	t.Helper()
	start := time.Now()
	install := exec.Command("go", "install", build.DelveModule+"@"+build.DelveVersion)
	install.Env = append(os.Environ(), "GOBIN="+t.TempDir(), "GOFLAGS=", "CGO_ENABLED=0", "GOTOOLCHAIN=local")
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("go install %s@%s on the host: %v\n%s", build.DelveModule, build.DelveVersion, err, out)
	}
	t.Logf("delve %s installed on the host in %s (fills the module cache served to builder pods)", build.DelveVersion, time.Since(start).Round(time.Millisecond))

	return serveModuleCache(t)
}

// hostGoProxy serves this machine's Go module download cache as a GOPROXY
// for builder pods (see delveGoProxy for why), after `go mod download` in
// the module at dir filled it with the module's dependencies. It returns
// the GOPROXY URL; the server stops with the test. Builds that use it set
// GOSUMDB=off: the pods cannot reach the checksum database either (go.sum
// still checks every module).
func hostGoProxy(t *testing.T, dir string) string {
	t.Helper()
	downloadModules(t, dir)
	return serveModuleCache(t)
}

// downloadModules runs `go mod download` in the module at dir, so that the
// host's module cache holds its dependencies: for builder pods (through
// hostGoProxy) and for local builds with GOPROXY=off on a machine whose
// module cache starts empty.
func downloadModules(t *testing.T, dir string) {
	t.Helper()
	start := time.Now()
	download := exec.Command("go", "mod", "download")
	download.Dir = dir
	download.Env = append(os.Environ(), "GOFLAGS=", "GOTOOLCHAIN=local")
	if out, err := download.CombinedOutput(); err != nil {
		t.Fatalf("go mod download in %s on the host: %v\n%s", dir, err, out)
	}
	t.Logf("modules of %s downloaded on the host in %s", dir, time.Since(start).Round(time.Millisecond))
}

// serveModuleCache serves the host's module download cache over HTTP on
// the node's address, the layout GOPROXY speaks.
func serveModuleCache(t *testing.T) string {
	t.Helper()
	modcache, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(strings.TrimSpace(string(modcache)), "cache", "download")
	l, err := net.Listen("tcp", net.JoinHostPort(nodeAddress, "0"))
	if err != nil {
		t.Fatalf("listening on the node's address for the Go proxy: %v", err)
	}
	srv := &http.Server{Handler: http.FileServer(http.Dir(dir)), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return "http://" + l.Addr().String()
}

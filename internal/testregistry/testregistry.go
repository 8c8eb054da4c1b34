// Package testregistry runs the real distribution registry (Debian's
// docker-registry package) for tests and benchmarks: the same server kind's
// local-registry pattern and most on-premises setups use, where
// go-containerregistry's in-memory registry may be more lenient.
package testregistry

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Binary is the registry executable Start runs.
const Binary = "docker-registry"

// InstallHint is how to get Binary, quoted when a test is skipped.
const InstallHint = "apt-get install docker-registry"

// startTimeout bounds how long the registry may take to answer /v2/.
const startTimeout = 15 * time.Second

// config is a minimal registry configuration: filesystem storage in a
// temporary directory, deletes enabled, errors only in the log.
const config = `version: 0.1
log:
  level: error
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
`

// Start runs a registry on a free loopback port with its storage in a
// temporary directory and returns its host ("127.0.0.1:port"), plain
// HTTP. The registry is stopped when the test ends. Without the binary the
// test is skipped.
func Start(t testing.TB) string {
	t.Helper()
	return StartWithConfig(t, "")
}

// StartWithConfig is Start with more top-level configuration appended to
// the minimal one (e.g. an `auth:` section): such a registry may answer
// /v2/ with 401, which counts as ready.
func StartWithConfig(t testing.TB, extra string) string {
	t.Helper()
	if _, err := exec.LookPath(Binary); err != nil {
		t.Skipf("%s not found (%v): install it with `%s`", Binary, err, InstallHint)
	}
	host, err := freeLoopbackAddr()
	if err != nil {
		t.Fatalf("testregistry: %v", err)
	}
	p, err := runAt(t.TempDir(), host, extra)
	if err != nil {
		t.Fatalf("testregistry: %v", err)
	}
	t.Cleanup(func() {
		if p.Stop() {
			t.Logf("testregistry: %s (pid %d) ignored SIGTERM and was killed", Binary, p.cmd.Process.Pid)
		}
	})
	return p.Host
}

// Process is a running registry.
type Process struct {
	// Host is "127.0.0.1:port", plain HTTP.
	Host string
	cmd  *exec.Cmd
	// exited is closed when the process has exited.
	exited chan struct{}
	out    *syncBuffer
}

// Run starts a registry on a free loopback port with its configuration and
// storage under dir, and waits until it answers. Outside tests (`make
// run-local`) the caller stops it with Stop.
func Run(dir string) (*Process, error) {
	host, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	return RunAt(dir, host)
}

// RunAt is Run listening on host (address:port), e.g. an address pods can
// reach; restarting it on the same dir keeps what was pushed.
func RunAt(dir, host string) (*Process, error) {
	return runAt(dir, host, "")
}

func runAt(dir, host, extra string) (*Process, error) {
	bin, err := exec.LookPath(Binary)
	if err != nil {
		return nil, fmt.Errorf("%s not found (%v): install it with `%s`", Binary, err, InstallHint)
	}
	cfg := filepath.Join(dir, "config.yml")
	storage := filepath.Join(dir, "storage")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(config, storage, host)+extra), 0o600); err != nil {
		return nil, err
	}
	p := &Process{Host: host, out: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(bin, "serve", cfg)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	if err := waitReady(host, p.exited); err != nil {
		p.Stop()
		return nil, fmt.Errorf("%w\n%s output:\n%s", err, Binary, p.out.String())
	}
	return p, nil
}

// Stop ends the registry by its PID: SIGTERM, then SIGKILL if it has not
// exited after a few seconds. It reports whether it had to kill.
func (p *Process) Stop() (killed bool) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return false
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return true
	}
}

// freeLoopbackAddr returns a loopback address whose port was free a moment
// ago. The registry cannot be handed a listener, so another process could
// take the port in between; the start then fails loudly, never silently.
func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// waitReady polls http://host/v2/ until it answers 200, the process exits
// or startTimeout passes.
func waitReady(host string, exited <-chan struct{}) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("%s exited before answering", Binary)
		default:
		}
		resp, err := client.Get("http://" + host + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s did not answer on %s within %s", Binary, host, startTimeout)
}

// syncBuffer collects the registry's output from its two streams.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is everything written so far.
func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

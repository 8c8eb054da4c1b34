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
	bin, err := exec.LookPath(Binary)
	if err != nil {
		t.Skipf("%s not found (%v): install it with `%s`", Binary, err, InstallHint)
	}

	dir := t.TempDir()
	host, err := freeLoopbackAddr()
	if err != nil {
		t.Fatalf("testregistry: %v", err)
	}
	cfg := filepath.Join(dir, "config.yml")
	storage := filepath.Join(dir, "storage")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(config, storage, host)), 0o600); err != nil {
		t.Fatalf("testregistry: %v", err)
	}

	out := &syncBuffer{}
	cmd := exec.Command(bin, "serve", cfg)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("testregistry: start %s: %v", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { stop(t, cmd.Process, exited) })

	if err := waitReady(host, exited); err != nil {
		t.Fatalf("testregistry: %v\n%s output:\n%s", err, Binary, out.String())
	}
	return host
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
func waitReady(host string, exited <-chan error) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return fmt.Errorf("%s exited before answering: %v", Binary, err)
		default:
		}
		resp, err := client.Get("http://" + host + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s did not answer on %s within %s", Binary, host, startTimeout)
}

// stop ends the registry process by its PID: SIGTERM, then SIGKILL if it
// has not exited after a few seconds.
func stop(t testing.TB, p *os.Process, exited <-chan error) {
	_ = p.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		_ = p.Kill()
		<-exited
		t.Logf("testregistry: %s (pid %d) ignored SIGTERM and was killed", Binary, p.Pid)
	}
}

// syncBuffer collects the registry's output from its two streams.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

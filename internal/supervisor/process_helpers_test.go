package supervisor

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// roleEnv makes the test binary the supervisor (or sync) in a child
// process: the supervisor is PID 1 of its container and reaps every
// child, which must not happen inside the test process.
const roleEnv = "LIVEUPDATE_TEST_ROLE"

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "supervise":
		s := &Supervisor{Program: os.Args[1:], After: After(os.Getenv("AFTER")), Root: os.Getenv("ROOT"), Orig: os.Getenv("ORIG")}
		if c := os.Getenv("AFTER_COMMAND"); c != "" {
			s.Command = strings.Fields(c)
		}
		s.GateTimeout, _ = time.ParseDuration(os.Getenv("GATE"))
		s.StopTimeout, _ = time.ParseDuration(os.Getenv("STOP"))
		code, err := s.Run()
		if err != nil {
			fmt.Fprintln(os.Stderr, "supervisor:", err)
			os.Exit(1)
		}
		os.Exit(code)
	case "sync":
		res, err := Sync(context.Background(), os.Getenv("ROOT"), os.Getenv("ORIG"), os.Getenv("DIGEST"), os.Stdin)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		_ = json.NewEncoder(os.Stdout).Encode(res)
		os.Exit(0)
	}
	code := m.Run()
	if serverDir != "" {
		os.RemoveAll(serverDir)
	}
	os.Exit(code)
}

var (
	serverOnce sync.Once
	serverDir  string
	serverErr  error
)

// serverBinary is the test server (testdata/server.go.txt) built with go
// build as version v1 or v2, once per test binary run.
func serverBinary(t *testing.T, version string) string {
	t.Helper()
	serverOnce.Do(func() {
		serverDir, serverErr = os.MkdirTemp("", "liveupdate-server")
		if serverErr != nil {
			return
		}
		src, err := os.ReadFile("testdata/server.go.txt")
		if err != nil {
			serverErr = err
			return
		}
		if serverErr = os.WriteFile(filepath.Join(serverDir, "main.go"), src, 0o644); serverErr != nil {
			return
		}
		for _, v := range []string{"v1", "v2"} {
			cmd := exec.Command("go", "build", "-o", v, "-ldflags", "-X main.version="+v, "main.go")
			cmd.Dir = serverDir
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=", "GO111MODULE=off")
			if out, err := cmd.CombinedOutput(); err != nil {
				serverErr = fmt.Errorf("go build %s: %v: %s", v, err, out)
				return
			}
		}
	})
	if serverErr != nil {
		t.Fatal(serverErr)
	}
	return filepath.Join(serverDir, version)
}

// lockedBuffer collects a process's output while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// supervised is a supervisor process started by a test.
type supervised struct {
	cmd  *exec.Cmd
	out  *lockedBuffer
	root string
	port string
	done chan struct{}
	// pids are the program processes seen serving: the test ends them,
	// since killing the supervisor does not.
	pids []int
}

// startSupervisor runs the test binary as the supervisor of argv, with
// env (KEY=VALUE) added; it is killed when the test ends.
func startSupervisor(t *testing.T, root string, env []string, argv ...string) *supervised {
	t.Helper()
	s := &supervised{out: &lockedBuffer{}, root: root, port: freePort(t), done: make(chan struct{})}
	for _, kv := range env {
		if port, ok := strings.CutPrefix(kv, "PORT="); ok {
			s.port = port
		}
	}
	s.cmd = exec.Command(os.Args[0], argv...)
	s.cmd.Env = append(append(os.Environ(), roleEnv+"=supervise", "ROOT="+root, "PORT="+s.port), env...) // the last PORT wins
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	// The program inherits the output pipes: Wait must not wait for it.
	s.cmd.WaitDelay = time.Second
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		_ = s.cmd.Process.Kill()
		for _, pid := range s.pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		<-s.done
		if t.Failed() {
			t.Logf("supervisor output:\n%s", s.out.String())
		}
	})
	return s
}

// exitCode waits for the supervisor to end and returns its exit code.
func (s *supervised) exitCode(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-s.done:
		return s.cmd.ProcessState.ExitCode()
	case <-time.After(within):
		t.Fatalf("the supervisor did not exit within %s", within)
		return 0
	}
}

// get asks the program what it is ("v1 <pid> <live root>"); "" when
// nothing answers.
func (s *supervised) get() string { return s.ask("/") }

// ask GETs path from the program and returns the body, "" on errors.
func (s *supervised) ask(path string) string {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get("http://127.0.0.1:" + s.port + path)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// waitServing polls the program every 20 ms until it answers with the
// version wanted, and returns its answer.
func (s *supervised) waitServing(t *testing.T, version string, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if got := s.get(); strings.HasPrefix(got, version+" ") {
			pid, _ := strconv.Atoi(pidOf(got))
			s.pids = append(s.pids, pid)
			return got
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the program did not serve %s within %s (it says %q)", version, within, s.get())
	return ""
}

// sync runs the test binary as `sync` in another process, as the
// operator's exec would, with tarball on stdin.
func (s *supervised) sync(t *testing.T, digest string, tarball []byte) (SyncResult, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), roleEnv+"=sync", "ROOT="+s.root, "DIGEST="+digest)
	cmd.Stdin = bytes.NewReader(tarball)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return SyncResult{}, fmt.Errorf("%v: %s", err, strings.TrimSpace(stderr.String()))
	}
	var res SyncResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("sync printed %q: %v", stdout.String(), err)
	}
	return res, nil
}

// tarOf is a tar of files (image path -> content; mode 0755), in order.
func tarOf(t *testing.T, files ...string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i := 0; i+1 < len(files); i += 2 {
		data, err := os.ReadFile(files[i+1])
		if err != nil {
			data = []byte(files[i+1]) // not a file: the content itself
		}
		if err := tw.WriteHeader(&tar.Header{Name: files[i], Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(data))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// pidOf is the pid in a program's answer.
func pidOf(answer string) string { return strings.Fields(answer)[1] }

package operatortest

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/devloop-dev/devloop/internal/identity"
)

// SyncCall is one sync a pod was given.
type SyncCall struct {
	Namespace, Pod, Container string
	Command                   []string
	// Files are the tar's entries: name -> "mode:content".
	Files map[string]string
}

// ScriptedSync stands in for `/.devloop/supervisor sync` in the pods (no pod
// runs in envtest): it records what each sync was given and answers as
// the supervisor does, or fails for the pods told to. Only the operator's
// branch logic is tested with it; the real exec is the e2e test's.
type ScriptedSync struct {
	mu    sync.Mutex
	calls []SyncCall
	fail  map[string]string // namespace/pod -> the sync's error
}

func (s *ScriptedSync) Exec(_ context.Context, _ *identity.Tenant, ns, pod, container string, command []string, stdin io.Reader, stdout, stderr io.Writer) error {
	call := SyncCall{Namespace: ns, Pod: pod, Container: container, Command: command, Files: map[string]string{}}
	tr := tar.NewReader(stdin)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(tr)
		call.Files[h.Name] = fmt.Sprintf("%03o:%s", h.Mode, body)
	}
	s.mu.Lock()
	s.calls = append(s.calls, call)
	msg := s.fail[ns+"/"+pod]
	s.mu.Unlock()
	if msg != "" {
		fmt.Fprintln(stderr, msg)
		return errors.New("command terminated with exit code 1")
	}
	digest := strings.TrimPrefix(command[len(command)-1], "--digest=")
	return json.NewEncoder(stdout).Encode(map[string]any{"digest": digest, "restartedMs": 7, "files": len(call.Files)})
}

// Of are the syncs of digest made to pod in namespace ns.
func (s *ScriptedSync) Of(ns, pod, digest string) []SyncCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []SyncCall
	for _, c := range s.calls {
		if c.Namespace == ns && c.Pod == pod && c.Command[len(c.Command)-1] == "--digest="+digest {
			out = append(out, c)
		}
	}
	return out
}

// FailFor makes syncs to pod in ns fail with msg.
func (s *ScriptedSync) FailFor(ns, pod, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail[ns+"/"+pod] = msg
}

// staticSupervisor builds a static linux/amd64 binary standing in for the
// supervisor live-updatable images get (the build refuses a dynamic one;
// no pod runs it in envtest).
func staticSupervisor(dir string) (string, error) {
	src := filepath.Join(dir, "supervisor.go")
	if err := os.WriteFile(src, []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
		return "", err
	}
	out := filepath.Join(dir, "supervisor")
	cmd := exec.Command("go", "build", "-o", out, src)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64", "GOFLAGS=", "GO111MODULE=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building a static supervisor: %v: %s", err, b)
	}
	return out, nil
}

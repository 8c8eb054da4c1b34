package helper

import (
	"bufio"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/internal/image"
	"github.com/devloop-dev/devloop/internal/testregistry"
)

// TestAssembleWaitsForTheRegistryToReturn is issue 43's heal time for a
// builder Job: the registry is down when the assemble container starts
// (the build command has run), and it comes back a while later. The
// container, run with the arguments BuilderJob gives it, says on its log
// that it waits, and pushes what was built once the registry answers,
// instead of exiting so that the Job is replaced and its build command
// run again.
func TestAssembleWaitsForTheRegistryToReturn(t *testing.T) {
	testregistry.Start(t) // skips, as every registry test does, without the registry's binary
	_, ref := pushedSource(t, map[string]string{"cmd/main.go": "package main\n"})
	// An address nothing listens on yet: the registry "down".
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host := l.Addr().String()
	l.Close()

	job, err := build.BuilderJob(build.JobRequest{
		Name: "b", Namespace: "default", HelperImage: "helper", Source: ref, Platform: "linux/amd64",
		Image: image.Spec{Name: "api", Platforms: []string{"linux/amd64"},
			Layers: []v1alpha1.LayerMapping{{From: "out/api", To: "/api", Mode: "0755"}}, Entrypoint: []string{"/api"}},
		Run:      v1alpha1.BuildRun{Image: "golang", Command: []string{"go", "build", "-o", "out/api", "./cmd"}},
		Registry: image.Registry{Prefix: host + "/team", Insecure: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	workspace := t.TempDir()
	if err := os.MkdirAll(filepath.Join(workspace, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(workspace, "out", "api"), []byte("\x7fELF binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(t.TempDir(), "termination-log")
	args := withFlag(job.Spec.Template.Spec.Containers[0].Args, "--dir", workspace)
	args = append(args, "--termination-log", report)

	// The step logs to stdout, as in its container.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	t.Cleanup(func() { os.Stdout = stdout })
	done := make(chan error, 1)
	go func() { done <- runHelper(args[1:]) }()

	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	// The container says it waits, and has not given up.
	waited := ""
	for waited == "" {
		select {
		case line := <-lines:
			if strings.HasPrefix(line, build.RegistryWaitLogPrefix) {
				waited = line
			}
		case err := <-done:
			t.Fatalf("assemble ended with the registry down (%v) instead of waiting for it", err)
		case <-time.After(2 * time.Minute):
			t.Fatal("assemble neither waited for the registry nor ended")
		}
	}
	t.Logf("assemble's log: %s", waited)
	if !strings.Contains(waited, host) || !strings.Contains(waited, build.RegistryWaitLogSince) {
		t.Errorf("the wait line %q names neither the registry %s nor how long it has been down", waited, host)
	}

	reg, err := testregistry.RunAt(t.TempDir(), host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Stop() })
	back := time.Now()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("assemble after the registry came back: %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("assemble did not push within 2 minutes of the registry's return")
	}
	t.Logf("pushed %s after the registry came back", time.Since(back).Round(100*time.Millisecond))
	w.Close()
	data, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var rep build.AssembleReport
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatalf("termination message %q: %v", data, err)
	}
	testregistry.Pull(t, host+"/team/api@"+rep.Digest)
}

// TestAssembleGivesUpOnARegistryDownPastItsWait: a registry down for
// longer than --registry-wait ends the step with ExitUnavailable, so the
// operator replaces the Job as before.
func TestAssembleGivesUpOnARegistryDownPastItsWait(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host := l.Addr().String()
	l.Close()
	workspace := t.TempDir()
	if err := os.MkdirAll(filepath.Join(workspace, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(workspace, "out", "api"), []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	img, _ := json.Marshal(image.Spec{Name: "api", Platforms: []string{"linux/amd64"},
		Layers: []v1alpha1.LayerMapping{{From: "out/api", To: "/api", Mode: "0755"}}})
	reg, _ := json.Marshal(build.RegistryConfig{Prefix: host + "/team", Insecure: true})
	err = ExitCodeFor(Run(t.Context(), []string{"assemble", "--image", string(img), "--registry", string(reg),
		"--dir", workspace, "--termination-log", filepath.Join(t.TempDir(), "t"), "--registry-wait", "3s"}))
	var code ExitError
	if !errors.As(err, &code) || code.Code != build.ExitUnavailable {
		t.Fatalf("assemble with the registry down past its wait: %v, want exit code %d", err, build.ExitUnavailable)
	}
}

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// supervisorCommand runs this test binary under the supervisor's name, as
// the build puts the operator's binary at /.devloop/supervisor when it
// has no dedicated supervisor for the platform: TestMain dispatches
// before the tests run, as main does.
func supervisorCommand(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	link := filepath.Join(t.TempDir(), "supervisor")
	if err := os.Symlink(os.Args[0], link); err != nil {
		t.Fatal(err)
	}
	return exec.Command(link, args...)
}

// The binary started as `supervisor` is the supervisor: it runs the
// program and exits with its code; `sync` without a supervisor says so.
func TestBinaryNamedSupervisorSupervisesAndSyncs(t *testing.T) {
	g := NewWithT(t)
	root := t.TempDir()
	cmd := supervisorCommand(t, "supervise", "--root="+root, "--orig="+filepath.Join(root, "none"), "--gate-timeout=10ms", "--", "/bin/sh", "-c", "echo from the program; exit 7")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	g.Expect(err).To(HaveOccurred())
	g.Expect(cmd.ProcessState.ExitCode()).To(Equal(7), out.String())
	g.Expect(out.String()).To(ContainSubstring("from the program"))
	g.Expect(out.String()).NotTo(ContainSubstring("PASS"), "the tests must not run under the supervisor's name")

	sync := supervisorCommand(t, "sync", "--root="+t.TempDir(), "--digest=sha256:one")
	sync.Stdin = strings.NewReader("")
	out.Reset()
	sync.Stdout, sync.Stderr = &out, &out
	g.Expect(sync.Run()).To(HaveOccurred())
	g.Expect(out.String()).To(HavePrefix("devloop: no supervisor answers at "))

	bad := supervisorCommand(t, "supervise", "--after=later", "--", "/bin/true")
	out.Reset()
	bad.Stdout, bad.Stderr = &out, &out
	g.Expect(bad.Run()).To(HaveOccurred())
	g.Expect(out.String()).To(ContainSubstring("--after: want restart, none or command"))
}

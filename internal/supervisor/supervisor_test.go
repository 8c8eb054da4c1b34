package supervisor

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// image lays out an "image" in a temp dir with the v1 server at
// /srv/server (as an absolute path on this machine) and returns that path
// and a fresh live root.
func image(t *testing.T) (program, root string) {
	t.Helper()
	dir := t.TempDir()
	program = filepath.Join(dir, "img", "srv", "server")
	if err := os.MkdirAll(filepath.Dir(program), 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(serverBinary(t, "v1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(program, data, 0o755); err != nil {
		t.Fatal(err)
	}
	root = filepath.Join(dir, "live")
	if err := os.Mkdir(root, 0o777); err != nil {
		t.Fatal(err)
	}
	return program, root
}

// A sync with a new program binary restarts the program, the new one
// serves, and the same digest again changes nothing.
func TestSupervisorRestartsOnSync(t *testing.T) {
	g := NewWithT(t)
	program, root := image(t)
	s := startSupervisor(t, root, []string{"AFTER=restart", "GATE=1m"}, program, "--flag-passed")

	// The gate: nothing runs until the operator says go.
	time.Sleep(500 * time.Millisecond)
	g.Expect(s.get()).To(BeEmpty(), "the program started before the first sync")
	res, err := s.sync(t, "sha256:one", nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Started).To(BeTrue())
	first := s.waitServing(t, "v1", 10*time.Second)
	g.Expect(first).To(HaveSuffix(" " + root))

	// A new binary at the program's image path.
	start := time.Now()
	res, err = s.sync(t, "sha256:two", tarOf(t, program, serverBinary(t, "v2")))
	g.Expect(err).NotTo(HaveOccurred())
	second := s.waitServing(t, "v2", 10*time.Second)
	t.Logf("sync to v2 serving after %s (supervisor restart %d ms)", time.Since(start), res.RestartedMs)
	g.Expect(res).To(Equal(SyncResult{Digest: "sha256:two", RestartedMs: res.RestartedMs, Files: 1}))
	g.Expect(pidOf(second)).NotTo(Equal(pidOf(first)))
	g.Expect(filepath.Join(root, program)).To(BeARegularFile())
	g.Expect(os.ReadFile(filepath.Join(root, DigestName))).To(Equal([]byte("sha256:two\n")))
	// The old program was asked to stop with SIGTERM.
	g.Expect(s.out.String()).To(ContainSubstring("server v1 got terminated"))

	// The same digest twice: nothing written, nothing restarted.
	res, err = s.sync(t, "sha256:two", tarOf(t, program, serverBinary(t, "v1")))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Unchanged).To(BeTrue())
	g.Expect(res.Files).To(Equal(0))
	g.Expect(s.get()).To(Equal(second))
	g.Expect(os.ReadFile(filepath.Join(root, program))).To(Equal(mustRead(t, serverBinary(t, "v2"))))
}

// Without a sync within the gate timeout the program starts with the
// image's files; a container restarted after a sync starts at once with
// the synced files.
func TestSupervisorGateTimesOut(t *testing.T) {
	g := NewWithT(t)
	program, root := image(t)
	start := time.Now()
	s := startSupervisor(t, root, []string{"GATE=700ms"}, program)
	s.waitServing(t, "v1", 10*time.Second)
	g.Expect(time.Since(start)).To(BeNumerically(">=", 700*time.Millisecond))
	g.Expect(s.out.String()).To(ContainSubstring("no sync within 700ms: starting with the image's files"))

	_, err := s.sync(t, "sha256:two", tarOf(t, program, serverBinary(t, "v2")))
	g.Expect(err).NotTo(HaveOccurred())
	s.waitServing(t, "v2", 10*time.Second)

	// The container restarts (same emptyDir): no gate, the synced v2.
	g.Expect(s.cmd.Process.Signal(syscall.SIGTERM)).To(Succeed())
	g.Expect(s.exitCode(t, 10*time.Second)).To(Equal(42))
	again := startSupervisor(t, root, []string{"GATE=1m", "PORT=" + s.port}, program)
	again.waitServing(t, "v2", 5*time.Second)
	g.Expect(again.out.String()).To(ContainSubstring("resuming with the files of sha256:two"))
}

// Signals reach the program; the supervisor exits with the program's
// exit code, whether a signal or the program itself ended it.
func TestSupervisorForwardsSignalsAndExitCodes(t *testing.T) {
	g := NewWithT(t)
	program, root := image(t)

	s := startSupervisor(t, root, []string{"GATE=10ms"}, program)
	s.waitServing(t, "v1", 10*time.Second)
	g.Expect(s.cmd.Process.Signal(syscall.SIGUSR1)).To(Succeed())
	g.Eventually(s.out.String).Should(ContainSubstring("server v1 got user defined signal 1"))
	g.Expect(s.get()).To(HavePrefix("v1 "), "SIGUSR1 is passed on, not acted on")
	g.Expect(s.cmd.Process.Signal(syscall.SIGTERM)).To(Succeed())
	g.Expect(s.exitCode(t, 10*time.Second)).To(Equal(42))
	g.Expect(s.out.String()).To(ContainSubstring("server v1 got terminated"))

	// A crash is the supervisor's exit, with the program's code: the
	// kubelet sees a container restart like any other.
	crash := startSupervisor(t, filepath.Join(t.TempDir()), []string{"GATE=10ms"}, program)
	crash.waitServing(t, "v1", 10*time.Second)
	go crash.ask("/exit?code=3")
	g.Expect(crash.exitCode(t, 10*time.Second)).To(Equal(3))
	g.Expect(crash.out.String()).To(ContainSubstring("program exited with code 3"))
}

// A program that ignores SIGTERM is killed after the stop timeout, and a
// restart still happens.
func TestSupervisorKillsAProgramThatDoesNotStop(t *testing.T) {
	g := NewWithT(t)
	program, root := image(t)
	s := startSupervisor(t, root, []string{"GATE=10ms", "STOP=300ms", "IGNORE_TERM=1"}, program)
	s.waitServing(t, "v1", 10*time.Second)
	res, err := s.sync(t, "sha256:two", tarOf(t, program, serverBinary(t, "v2")))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.RestartedMs).To(BeNumerically(">=", 300))
	s.waitServing(t, "v2", 10*time.Second)
	g.Expect(s.out.String()).To(ContainSubstring("program did not stop within 300ms: killing it"))
}

// after: None writes the files and leaves the program running; after:
// Command runs the command, and its failure fails the sync.
func TestSupervisorAfterNoneAndCommand(t *testing.T) {
	g := NewWithT(t)
	program, root := image(t)
	s := startSupervisor(t, root, []string{"GATE=10ms", "AFTER=none"}, program)
	first := s.waitServing(t, "v1", 10*time.Second)
	asset := filepath.Join(filepath.Dir(program), "index.html")
	_, err := s.sync(t, "sha256:two", tarOf(t, asset, "<h1>two</h1>"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.get()).To(Equal(first))
	g.Expect(os.ReadFile(filepath.Join(root, asset))).To(Equal([]byte("<h1>two</h1>")))

	_, root2 := image(t)
	marker := filepath.Join(t.TempDir(), "reloaded")
	c := startSupervisor(t, root2, []string{"GATE=10ms", "AFTER=command", "AFTER_COMMAND=touch " + marker}, program)
	c.waitServing(t, "v1", 10*time.Second)
	_, err = c.sync(t, "sha256:two", tarOf(t, asset, "two"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(marker).To(BeAnExistingFile())

	f := startSupervisor(t, t.TempDir(), []string{"GATE=10ms", "AFTER=command", "AFTER_COMMAND=false"}, program)
	f.waitServing(t, "v1", 10*time.Second)
	_, err = f.sync(t, "sha256:two", tarOf(t, asset, "two"))
	g.Expect(err).To(MatchError(ContainSubstring("after-command false exited with code 1")))
	_, err = os.Stat(filepath.Join(f.root, DigestName))
	g.Expect(err).To(HaveOccurred(), "a failed sync records no digest, so the operator's retry applies it again")
}

// A sync without a supervisor says so.
func TestSyncWithoutSupervisor(t *testing.T) {
	g := NewWithT(t)
	s := &supervised{root: t.TempDir()}
	_, err := s.sync(t, "sha256:one", nil)
	g.Expect(err).To(MatchError(ContainSubstring("no supervisor answers at " + s.root + "/.supervisor.sock (is the container running under /.devloop/supervisor?)")))
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

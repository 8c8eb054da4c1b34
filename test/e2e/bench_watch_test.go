//go:build e2e

package e2e

import (
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// watchArm is devloop's arm as a user who keeps the plugin running runs
// it (issue 46): `kubectl devloop push DIR --watch`, started once like
// `tilt up`, pushes each new binary the local go build writes when its
// debounce ends; no process is started per change. Its own environment,
// in a namespace of its own, beside the per-change arm's.
type watchArm struct {
	*devloopArm
	out *timedLines
}

// watchDebounce is the watch's quiet time before it pushes, as a user
// gets it: the default (300ms), which a file moved into place whole cuts
// to 10ms (go build renames its output into place).
const watchDebounce = "300ms"

func startWatchArm(t *testing.T, prog benchProgram) *watchArm {
	t.Helper()
	a := &watchArm{devloopArm: startDevloopArmIn(t, "e2e-bench-tilt-dw", prog)}
	a.out = &timedLines{t0: time.Now()}
	cmd := onLaptop(exec.Command(a.plugin, append([]string{"--kubeconfig", laptopKubeconfig(t), "-n", a.ns, "push", a.dir, "--env", a.env,
		"--source", "app", "--watch", "--debounce", watchDebounce}, a.pushFlags()...)...))
	cmd.Stdout, cmd.Stderr = a.out, a.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	NewWithT(t).Expect(cmd.Start()).To(Succeed())
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		_ = cmd.Wait()
		t.Logf("push --watch, its lines: %s", a.out.String())
	})
	// Its first push (the tree as it is) is followed before changes start.
	NewWithT(t).Eventually(func() string { return a.out.String() }, 2*time.Minute, 100*time.Millisecond).
		Should(ContainSubstring("watching "), "push --watch started")
	return a
}

// change is one sample: edit and build; the running watch pushes it.
// The watch's follow must report it as a live update (one more "live
// update" line than before the change).
func (a *watchArm) change(v int) {
	before := strings.Count(a.out.String(), "live update")
	t0 := time.Now()
	sent := sentFromLaptop()
	build := a.build(v)
	a.builds = append(a.builds, build)
	d := waitServing(a.t, a.url, fmt.Sprintf("version %d ", v), t0, 2*time.Minute)
	a.samples = append(a.samples, d)
	NewWithT(a.t).Eventually(func() int { return strings.Count(a.out.String(), "live update") }, 2*time.Minute, 50*time.Millisecond).
		Should(BeNumerically(">", before), "change %d was a live update: %s", v, a.out.String())
	a.sent = append(a.sent, sentFromLaptop()-sent)
	a.t.Logf("watch   %2d: %s (go build done at %s, %s sent over the link)", v, d.Round(time.Millisecond), build.Round(time.Millisecond), kib(a.sent[len(a.sent)-1]))
}

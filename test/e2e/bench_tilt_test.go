//go:build e2e

package e2e

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
	. "github.com/devloop-dev/devloop/test/builder"
	. "github.com/devloop-dev/devloop/test/e2e/fixture"
)

// TestLiveUpdateAgainstTilt puts devloop's live update beside Tilt's
// live_update on the same change, interleaved in one run (issue 33): the
// Go server's source edited on this machine, compiled here by `go build`,
// and brought to answering the new version through its Service, polled
// every 20 ms. The local build is inside both samples.
//
//	devloop: `go build -o DIR/bin/server`, then `kubectl devloop push DIR`
//	    (the plugin built from this tree, run as a user runs it): the
//	    binary synced into the running pod by the operator, the program
//	    restarted by its supervisor.
//	devloop, watching: the same, but one `kubectl devloop push --watch`
//	    started beforehand pushes each build (bench_watch_test.go).
//	Tilt: `tilt up` on a Tiltfile whose local_resource runs the same go
//	    build on the source's change, and a custom_build (go build, then
//	    crane appends the binary to busybox and pushes: no Docker here)
//	    with live_update = [sync the binary, run a restart]: Tilt copies it
//	    into the container by exec (tar, so the image needs a shell) and
//	    the container's shell loop starts the new binary.
//	Tilt, rolling out (DEVLOOP_BENCH_TILT_ROLLOUT=1): a second `tilt up`
//	    whose custom_build has no live_update, so every build is an image
//	    pushed and the Deployment rolled out to it.
//
// DEVLOOP_BENCH_PROGRAM=operator changes an operator-sized binary instead
// of the small server (bench_program_test.go); devloop's arms then ship it
// by the path devloopPath picks (a source push compiled by the warm
// builder across a link, the binary otherwise), and the figures say which.
//
// It skips without tilt (DEVLOOP_BENCH_TILT or PATH) and crane
// (DEVLOOP_BENCH_CRANE or PATH); DEVLOOP_BENCH_TILT=skip runs devloop's
// arm alone; how they were built is in
// docs/performance.md. DEVLOOP_BENCH_TILT_ITERATIONS sets the changes per
// arm (15). It prints p50 and p90 of each arm and their ratios; no timing
// is asserted, but every devloop sample must have been a live update.
func TestLiveUpdateAgainstTilt(t *testing.T) {
	need(t)
	n := envInt("DEVLOOP_BENCH_TILT_ITERATIONS", 15)
	prog := selectedProgram(t)
	loadBefore := loadAverage()
	if os.Getenv("DEVLOOP_BENCH_TILT") == "skip" {
		// devloop's arm alone, for its breakdown (the operator's debug
		// log); no comparison.
		dl := startDevloopArm(t, prog)
		for i := 1; i <= n; i++ {
			offPhase()
			dl.change(i)
		}
		p50, p90 := percentiles(dl.samples)
		t.Logf("devloop alone (%s, %s path): p50 %s, p90 %s; load average %s before, %s after", prog.name, dl.path, p50.Round(10*time.Millisecond), p90.Round(10*time.Millisecond), loadBefore, loadAverage())
		return
	}
	tilt, crane := benchTool(t, "tilt"), benchTool(t, "crane")

	dl := startDevloopArm(t, prog)
	dw := startWatchArm(t, prog)
	tl := startTiltArm(t, tilt, crane, prog, true)
	var tr *tiltArm
	if tiltRollout() {
		tr = startTiltArm(t, tilt, crane, prog, false)
	}

	for i := 1; i <= n; i++ {
		arms := []func(int){dl.change, dw.change, tl.change}
		if tr != nil {
			arms = append(arms, tr.change)
		}
		rand.Shuffle(len(arms), func(i, j int) { arms[i], arms[j] = arms[j], arms[i] })
		for _, arm := range arms {
			offPhase()
			arm(i)
		}
	}
	dp50, dp90 := percentiles(dl.samples)
	wp50, wp90 := percentiles(dw.samples)
	tp50, tp90 := percentiles(tl.samples)
	var b strings.Builder
	fmt.Fprintf(&b, "program: %s (%.1f MiB binary); devloop's path: %s\n", prog.name, float64(tl.binarySize())/(1<<20), pathSays(dl.path))
	fmt.Fprintf(&b, "edit → build → new code answering through the Service (polled every 20 ms), %d changes per arm, interleaved in random order; load average %s before, %s after\n",
		n, loadBefore, loadAverage())
	fmt.Fprintf(&b, "| arm | p50 | p90 |\n|---|---|---|\n")
	fmt.Fprintf(&b, "| devloop push, live update | %s | %s |\n", dp50.Round(10*time.Millisecond), dp90.Round(10*time.Millisecond))
	fmt.Fprintf(&b, "| devloop push --watch (debounce %s, the default; 10ms for a binary moved into place), live update | %s | %s |\n", watchDebounce, wp50.Round(10*time.Millisecond), wp90.Round(10*time.Millisecond))
	fmt.Fprintf(&b, "| Tilt live_update (sync + restart) | %s | %s |\n", tp50.Round(10*time.Millisecond), tp90.Round(10*time.Millisecond))
	if tr != nil {
		rp50, rp90 := percentiles(tr.samples)
		fmt.Fprintf(&b, "| Tilt custom_build, rollout (no live_update) | %s | %s |\n", rp50.Round(10*time.Millisecond), rp90.Round(10*time.Millisecond))
	}
	fmt.Fprintf(&b, "devloop push / Tilt: p50 %.2f (goal ≤ 0.70), p90 %.2f (goal ≤ 0.80)\n", float64(dp50)/float64(tp50), float64(dp90)/float64(tp90))
	fmt.Fprintf(&b, "devloop push --watch / Tilt: p50 %.2f, p90 %.2f\n", float64(wp50)/float64(tp50), float64(wp90)/float64(tp90))
	fmt.Fprintf(&b, "local edit (+ go build on the binary path) p50 in the devloop arm: %s\n", median(dl.builds).Round(10*time.Millisecond))
	b.WriteString(dl.breakdownTable())
	fmt.Fprintf(&b, "link (Mbit/s up:down:round trip ms): %s; sent from the laptop per change, median: devloop push %s, push --watch %s, Tilt %s\n",
		linkProfile(), kib(medianBytes(dl.sent)), kib(medianBytes(dw.sent)), kib(medianBytes(tl.sent)))
	if tr != nil {
		fmt.Fprintf(&b, "sent from the laptop per change by Tilt's custom_build rollout, median: %s\n", kib(medianBytes(tr.sent)))
	}
	t.Log("\n" + b.String())
	out := filepath.Join(testenv.RepoRoot(), "bin", "e2e-bench-tilt.md")
	if prog.name != "server" {
		out = filepath.Join(testenv.RepoRoot(), "bin", "e2e-bench-tilt-"+prog.name+".md")
	}
	_ = os.WriteFile(out, []byte(b.String()), 0o644)
	t.Logf("written to %s", out)
}

// benchTool finds a tool the Tilt arm needs, or skips.
func benchTool(t *testing.T, name string) string {
	t.Helper()
	if p := os.Getenv("DEVLOOP_BENCH_" + strings.ToUpper(name)); p != "" {
		return p
	}
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("no %s (set DEVLOOP_BENCH_%s or put it on PATH): the Tilt comparison needs it", name, strings.ToUpper(name))
	}
	return p
}

func loadAverage() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func medianBytes(n []int64) int64 {
	if len(n) == 0 {
		return 0
	}
	s := slices.Clone(n)
	slices.Sort(s)
	return s[len(s)/2]
}

func median(d []time.Duration) time.Duration {
	p50, _ := percentiles(d)
	return p50
}

// goBuildEnv is the environment of both arms' local go build: a static
// linux/amd64 binary for the node.
func goBuildEnv() []string {
	return append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64", "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod")
}

const goBuildFlags = `-trimpath -ldflags="-s -w"`

// devloopArm is the environment the devloop arm changes.
type devloopArm struct {
	t        *testing.T
	plugin   string
	mod, dir string // the Go module edited; the directory pushed
	env      string
	ns       string
	prog     benchProgram
	path     string // "binary" or "source": devloopPath
	url      string
	samples  []time.Duration
	builds   []time.Duration
	sent     []int64                 // bytes the laptop sent over the link, per change
	steps    []map[string]stepFigure // the plugin's breakdown of each change
}

func startDevloopArm(t *testing.T, prog benchProgram) *devloopArm {
	t.Helper()
	return startDevloopArmIn(t, "e2e-bench-tilt-dl", prog)
}

// startDevloopArmIn starts the arm's environment in a new namespace named
// from prefix, for prog shipped by devloopPath(prog).
func startDevloopArmIn(t *testing.T, prefix string, prog benchProgram) *devloopArm {
	t.Helper()
	// DEVLOOP_BENCH_PLUGIN: the plugin built beforehand from this tree.
	plugin := os.Getenv("DEVLOOP_BENCH_PLUGIN")
	if plugin == "" {
		plugin = filepath.Join(t.TempDir(), "kubectl-devloop")
		cmd := exec.Command("go", "build", "-o", plugin, "./cmd/kubectl-devloop")
		cmd.Dir = testenv.RepoRoot()
		out, err := cmd.CombinedOutput()
		NewWithT(t).Expect(err).NotTo(HaveOccurred(), "building the plugin: %s", out)
	}

	ns := namespace(t, prefix)
	a := &devloopArm{t: t, plugin: plugin, ns: ns, env: "push-live", prog: prog, path: devloopPath(prog)}
	var img v1alpha1.ImageSpec
	within := 5 * time.Minute
	switch a.path {
	case "binary", "delta":
		a.mod = sourceDir(t, prog.files)
		a.dir = sourceDir(t, Files{"deploy/bench.yaml": benchManifests})
		a.build(0)
		img = Image("server", Program("bin/server", "/server"))
	case "source":
		// The module itself is pushed; its warm builder compiles it (the
		// first compile is cold: modules from this machine's cache).
		files := prog.at(0).files
		files["deploy/bench.yaml"] = benchManifests
		a.mod = sourceDir(t, files)
		a.dir = a.mod
		img = warmBuiltImage(prog, hostGoProxy(t, a.mod))
		within = 20 * time.Minute
	default:
		t.Fatalf("DEVLOOP_BENCH_DEVLOOP_PATH=%q: want binary, delta or source", a.path)
	}
	_, a.url = startBenchEnv(t, ns, a.env, a.dir, img, true, within)
	if a.path == "source" || a.path == "delta" {
		// One change first, not counted: the warm builder's pod starts
		// and compiles the edited package into its cache; or the binary
		// is pushed whole once by push --delta, the base of the next.
		a.change(warmUpVersion)
		a.samples, a.builds, a.sent = nil, nil, nil
	}
	return a
}

// warmUpVersion is the version of the source path's uncounted first change.
const warmUpVersion = 9999999

// build edits the source to version v and, on the binary path, compiles it
// into the pushed directory (the source path pushes the edit itself).
func (a *devloopArm) build(v int) time.Duration {
	t0 := time.Now()
	g := NewWithT(a.t)
	g.Expect(os.WriteFile(filepath.Join(a.mod, a.prog.main), []byte(a.prog.src(v)), 0o644)).To(Succeed())
	if a.path == "source" {
		return time.Since(t0)
	}
	cmd := onLaptop(exec.Command("sh", "-c", "go build "+goBuildFlags+" -o "+filepath.Join(a.dir, "bin", "server")+" "+a.prog.pkg))
	cmd.Dir, cmd.Env = a.mod, goBuildEnv()
	out, err := cmd.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "go build: %s", out)
	return time.Since(t0)
}

// change is one sample: edit, build, push (the plugin following the
// environment to Ready, as a user runs it) while the Service is polled.
// The plugin's lines are logged with when they came, after the change.
func (a *devloopArm) change(v int) {
	g := NewWithT(a.t)
	t0 := time.Now()
	build := a.build(v)
	a.builds = append(a.builds, build)
	sent := sentFromLaptop()
	push := onLaptop(exec.Command(a.plugin, append([]string{"--kubeconfig", laptopKubeconfig(a.t), "-n", a.ns, "push", a.dir, "--env", a.env, "--source", "app", "--timeout", "2m"}, a.pushFlags()...)...))
	out := &timedLines{t0: t0}
	push.Stdout, push.Stderr = out, out
	started := time.Since(t0)
	g.Expect(push.Start()).To(Succeed())
	d := waitServing(a.t, a.url, fmt.Sprintf("version %d ", v), t0, 2*time.Minute)
	err := push.Wait()
	g.Expect(err).NotTo(HaveOccurred(), "kubectl devloop push: %s", out.String())
	g.Expect(out.String()).To(ContainSubstring("live update"), "change %d was a live update: %s", v, out.String())
	a.samples = append(a.samples, d)
	a.sent = append(a.sent, sentFromLaptop()-sent)
	a.steps = append(a.steps, parseBreakdown(out.plain()))
	a.t.Logf("devloop %2d: %s (go build done at %s, plugin started at %s, %s sent over the link; its lines: %s)", v, d.Round(time.Millisecond),
		build.Round(time.Millisecond), started.Round(time.Millisecond), kib(a.sent[len(a.sent)-1]), out.String())
}

// timedLines keeps a command's output lines, each with when it came.
type timedLines struct {
	t0    time.Time
	mu    sync.Mutex
	lines []string
	part  string
}

func (w *timedLines) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.part += string(p)
	for {
		i := strings.IndexByte(w.part, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.lines = append(w.lines, fmt.Sprintf("[%s] %s", time.Since(w.t0).Round(time.Millisecond), w.part[:i]))
		w.part = w.part[i+1:]
	}
}

// plain is the lines as the command wrote them, without their times.
func (w *timedLines) plain() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.lines))
	for _, l := range w.lines {
		if _, rest, ok := strings.Cut(l, "] "); ok {
			l = rest
		}
		out = append(out, l)
	}
	return out
}

func (w *timedLines) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(append(w.lines, w.part), " | ")
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// tiltArm is the same server under `tilt up`.
type tiltArm struct {
	t       *testing.T
	prog    benchProgram
	dir     string
	url     string
	samples []time.Duration
	sent    []int64 // bytes the laptop sent over the link, per change
}

// tiltfile: the binary compiled by a local_resource on a source change;
// the image assembled and pushed without Docker; live_update syncs the
// binary and restarts it. The restart kills the copy the container's
// loop runs (the loop copies the synced binary to /app/run first, so the
// sync never writes over a running executable).
//
// Without live_update (tiltRollout), each build is an image pushed and the
// Deployment rolled out to it: Tilt's custom_build rollout.
const tiltfile = `allow_k8s_contexts(k8s_context())
update_settings(max_parallel_updates=1)
default_registry('%[1]s/%[2]s')
k8s_yaml('k8s.yaml')
local_resource('compile', 'go build %[3]s -o build/server %[4]s', deps=['%[5]s'], labels=['bench'])
custom_build('tilt-server', './image.sh', deps=['build'], skips_local_docker=True%[6]s)
k8s_resource('bench', resource_deps=['compile'])
`

// tiltLiveUpdate is the custom_build's live_update: sync the binary,
// restart it.
const tiltLiveUpdate = `,
    live_update=[sync('build', '/app/build'), run('kill $(cat /app/run/server.pid)')]`

// tiltImage appends the binary to busybox as /app/build/server, owned by
// the pod's user so Tilt's sync (tar by exec) can replace it, and
// /app/run, where the container's loop runs it from.
const tiltImage = `#!/bin/sh
set -e
rm -rf .stage && mkdir -p .stage/app/build .stage/app/run
cp build/server .stage/app/build/server
tar --owner=65532 --group=65532 -C .stage -cf .stage.tar app
%[1]s append --insecure -b %[2]s -f .stage.tar -t "$EXPECTED_REF"
`

// tiltLoop is the container's command: the synced binary copied and run,
// again whenever it exits (the restart).
const tiltLoop = `command: [sh, -c, "while true; do cp /app/build/server /app/run/server; /app/run/server & echo $! > /app/run/server.pid; wait $!; done"]`

// tiltRollout says whether Tilt's custom_build rollout arm runs too
// (DEVLOOP_BENCH_TILT_ROLLOUT=1): a second `tilt up`, without live_update.
func tiltRollout() bool { return os.Getenv("DEVLOOP_BENCH_TILT_ROLLOUT") == "1" }

func startTiltArm(t *testing.T, tilt, crane string, prog benchProgram, live bool) *tiltArm {
	t.Helper()
	g := NewWithT(t)
	prefix, update, port := "e2e-bench-tilt-t", tiltLiveUpdate, "10399"
	if !live {
		prefix, update, port = "e2e-bench-tilt-r", "", "10400"
	}
	ns := namespace(t, prefix)
	manifests := strings.ReplaceAll(Documents(
		Deployment("bench", "server", "image: tilt-server", tiltLoop,
			"ports: [{name: http, containerPort: 8080}]",
			"readinessProbe: {tcpSocket: {port: http}, periodSeconds: 1}",
			`env: [{name: ITERATION, value: "0"}]`),
		Service("bench")), "metadata: {name: bench}", "metadata: {name: bench, namespace: "+ns+"}")
	files := prog.at(0).files
	files["k8s.yaml"] = manifests
	files["Tiltfile"] = fmt.Sprintf(tiltfile, registry, ns, goBuildFlags, prog.pkg, prog.main, update)
	files["image.sh"] = fmt.Sprintf(tiltImage, crane, busybox)
	files[".tiltignore"] = ".stage\n.stage.tar\n"
	a := &tiltArm{t: t, prog: prog, dir: sourceDir(t, files)}
	g.Expect(os.Chmod(filepath.Join(a.dir, "image.sh"), 0o755)).To(Succeed())

	var log bytes.Buffer
	var mu sync.Mutex
	// A Tilt built from source serves its web UI from a dev server it
	// installs with yarn unless told prod (its embedded assets: see
	// docs/performance.md for the build); updates by exec, as on any
	// cluster without Docker.
	cmd := onLaptop(exec.Command(tilt, "up", "--stream", "--web-mode=prod", "--update-mode=exec", "--port", port, "--host", "127.0.0.1",
		"--file", filepath.Join(a.dir, "Tiltfile")))
	cmd.Dir = a.dir
	// Tilt's go build shares this machine's build cache with devloop's
	// (HOME is Tilt's own, for its state).
	cmd.Env = append(goBuildEnv(), "KUBECONFIG="+laptopKubeconfig(t), "PATH="+filepath.Dir(kubectlPath())+":"+os.Getenv("PATH"),
		"TILT_DISABLE_ANALYTICS=1", "HOME="+t.TempDir(), "GOCACHE="+goEnv(t, "GOCACHE"), "GOMODCACHE="+goEnv(t, "GOMODCACHE"), "GOPATH="+goEnv(t, "GOPATH"))
	cmd.Stdout, cmd.Stderr = lockedWriter{&log, &mu}, lockedWriter{&log, &mu}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	g.Expect(cmd.Start()).To(Succeed())
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		_ = cmd.Wait()
		mu.Lock()
		defer mu.Unlock()
		t.Logf("tilt's log, last lines:\n%s", lastLines(log.String(), 40))
	})
	a.url = serviceURL(t, ns, "bench")
	waitServing(t, a.url, "version 0 ", time.Now(), 5*time.Minute)
	return a
}

// change is one sample: the source edited; Tilt's watch compiles it and
// live-updates the container.
func (a *tiltArm) change(v int) {
	t0 := time.Now()
	sent := sentFromLaptop()
	NewWithT(a.t).Expect(os.WriteFile(filepath.Join(a.dir, a.prog.main), []byte(a.prog.src(v)), 0o644)).To(Succeed())
	d := waitServing(a.t, a.url, fmt.Sprintf("version %d ", v), t0, 2*time.Minute)
	a.samples = append(a.samples, d)
	a.sent = append(a.sent, sentFromLaptop()-sent)
	a.t.Logf("tilt    %2d: %s (%s sent over the link)", v, d.Round(time.Millisecond), kib(a.sent[len(a.sent)-1]))
}

// binarySize is the size of the binary Tilt's local_resource built.
func (a *tiltArm) binarySize() int64 {
	fi, err := os.Stat(filepath.Join(a.dir, "build", "server"))
	if err != nil {
		return 0
	}
	return fi.Size()
}

// pathSays is devloop's path in words, for the figures.
func pathSays(path string) string {
	switch path {
	case "source":
		return "source push (the edited file crosses the link), compiled by the image's warm builder"
	case "delta":
		return "binary push --delta (the local go build's output, sent as a delta against the last binary pushed whole)"
	}
	return "binary push (the local go build's output)"
}

// pushFlags are the flags of the arm's path beside push's own.
func (a *devloopArm) pushFlags() []string {
	if a.path == "delta" {
		return []string{"--delta"}
	}
	return nil
}

func goEnv(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "env", name).Output()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return strings.TrimSpace(string(out))
}

type lockedWriter struct {
	b  *bytes.Buffer
	mu *sync.Mutex
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

package build

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/devloop-dev/devloop/internal/memo"
	"github.com/devloop-dev/devloop/internal/pods"
)

// A cold compile in the cluster takes many minutes, and its last log line
// ("go: downloading …") says nothing of how far it is. `make dev-up`
// prints the packages compiled so far; a build in the cluster says the
// same in its component's message: "building image operator in job …:
// 312 packages compiled in 2m10s". What is counted is what the go
// command prints with -v (goEnv sets GOFLAGS=-v when the run step sets
// no GOFLAGS): one line per package it compiles — the standard library's
// included on a cold cache, none a cache hit — from every go command the
// run step starts (go build, go install, go run of a generator), whatever
// runs them (make, a script). A run step that sets GOFLAGS itself, or
// runs no go command, shows no count.

// compiledPackage says whether a build log line is the go command's -v
// line for a package: an import path alone on its line. Lines of other
// tools (make's commands, "go: downloading m v1", "# pkg" before an
// error, PASS) have spaces, colons or no lower-case letter.
func compiledPackage(line string) bool {
	line = strings.TrimRight(line, "\r")
	if line == "" || len(line) > 512 || line[0] == '#' || line[0] == '-' || line[0] == '.' || line[0] == '/' {
		return false
	}
	lower := false
	for _, r := range line {
		switch {
		case r >= 'a' && r <= 'z':
			lower = true
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9', strings.ContainsRune("._~+/-", r):
		default:
			return false
		}
	}
	return lower
}

// The warm builder's run step, and a builder Job's build container
// (countedCommand), count the Go packages the image's `go:` paths need
// before the command runs (helper/countpackages.go) and say
// so in one line of the build's output: "devloop: 1180 Go packages in
// the build (go list -deps)". On a cold cache the build compiles that
// many (fewer where the cache has some), so the count has an end.
const (
	PackagesTotalPrefix = "devloop:"
	PackagesTotalSuffix = "Go packages in the build (go list -deps)"
)

// packagesTotal reads the total from its line.
func packagesTotal(line string) (int, bool) {
	rest, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), PackagesTotalPrefix+" ")
	if !ok {
		return 0, false
	}
	n, rest, ok := strings.Cut(rest, " ")
	if !ok || rest != PackagesTotalSuffix {
		return 0, false
	}
	total, err := strconv.Atoi(n)
	return total, err == nil && total > 0
}

// buildProgress is what a running build's log said last: packages
// compiled (of total, when the build counted them), and how long the
// build had run then.
type buildProgress struct {
	packages, total int
	after           time.Duration
}

// String is the message's part: ": 312 of 1180 packages compiled in
// 2m10s" (": 312 packages compiled in 2m10s" without a total), or ""
// before the first.
func (p buildProgress) String() string {
	if p.packages == 0 {
		return ""
	}
	unit := "packages"
	if p.packages == 1 && p.total == 0 {
		unit = "package"
	}
	if p.total > 0 {
		return fmt.Sprintf(": %d of %d %s compiled in %s", p.packages, p.total, unit, p.after.Round(time.Second))
	}
	return fmt.Sprintf(": %d %s compiled in %s", p.packages, unit, p.after.Round(time.Second))
}

// jobsProgress is the last counts of an image's running builder Jobs
// (one per platform), by Job name.
type jobsProgress map[string]buildProgress

// progressKey is where an image's jobsProgress is kept.
func (s *imageBuilds) progressKey(img string) string {
	return memo.Key(s.env.UID, "build-progress/"+img)
}

// countJobProgress counts the packages the build container of a builder
// Job's pod compiled so far (its whole log, read as the tenant). A log
// that cannot be read leaves the last count.
func (s *imageBuilds) countJobProgress(ctx context.Context, logs pods.LogReader, img, job string, pod *corev1.Pod) {
	// The total is a line of the same log (countedCommand's helper),
	// read on the way.
	total := 0
	n, err := logs.CountLines(ctx, s.env.Namespace, pod.Name, ContainerBuild, func(line string) bool {
		if t, ok := packagesTotal(line); ok {
			total = t
			return false
		}
		return compiledPackage(line)
	})
	if err != nil {
		return
	}
	var after time.Duration
	if since := runningSince(pod, ContainerBuild); !since.IsZero() {
		after = time.Since(since)
	}
	last, _ := s.e.progress.Get(s.progressKey(img))
	next := jobsProgress{job: {packages: n, total: total, after: after}}
	for j, p := range last {
		if j != job {
			next[j] = p
		}
	}
	s.e.progress.Put(s.progressKey(img), next)
}

// jobProgress is the last counts of the image's builder Jobs running now,
// added up; what is kept of Jobs no longer running is dropped.
func (s *imageBuilds) jobProgress(img string, running []string) buildProgress {
	last, _ := s.e.progress.Get(s.progressKey(img))
	var sum buildProgress
	kept := jobsProgress{}
	for _, job := range running {
		if p, ok := last[job]; ok {
			kept[job] = p
			sum.packages += p.packages
			sum.total += p.total
			sum.after = max(sum.after, p.after)
		}
	}
	if len(kept) != len(last) {
		s.e.progress.Put(s.progressKey(img), kept)
	}
	return sum
}

// runningSince is when the container started running (zero when it
// does not run).
func runningSince(pod *corev1.Pod, container string) time.Time {
	for _, statuses := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range statuses {
			if cs.Name == container && cs.State.Running != nil {
				return cs.State.Running.StartedAt.Time
			}
		}
	}
	return time.Time{}
}

// packageCounter counts the compiled-package lines of a warm build's
// output as it streams by.
type packageCounter struct {
	mu      sync.Mutex
	partial []byte
	n       int
	total   int
}

func (c *packageCounter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	data := append(c.partial, p...)
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		if compiledPackage(string(data[:i])) {
			c.n++
		} else if total, ok := packagesTotal(string(data[:i])); ok {
			c.total = total
		}
		data = data[i+1:]
	}
	if len(data) > 4096 {
		// No package line is that long: keep none of it.
		data = nil
	}
	c.partial = append(c.partial[:0:0], data...)
	return len(p), nil
}

// count is the lines counted so far, and the total the build announced
// (0 when it did not).
func (c *packageCounter) count() (n, total int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n, c.total
}

// progress is a warm build's count so far, and how long it has run.
func (r *warmRun) progress() buildProgress {
	var after time.Duration
	if started := r.startedAt(); !started.IsZero() {
		after = time.Since(started)
	}
	n, total := r.packages.count()
	return buildProgress{packages: n, total: total, after: after}
}

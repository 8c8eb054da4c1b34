package build

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// TestLanesAreOnePerNamespaceClaimAndPlatform: environments of the same
// name in two namespaces have claims of the same name; their builds do
// not wait for each other, nor do two platforms of one claim.
func TestLanesAreOnePerNamespaceClaimAndPlatform(t *testing.T) {
	l := newLanes()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	never := func(holder string) { t.Errorf("waited for %s", holder) }
	held, err := l.acquire(ctx, laneOf("a", "api-app-1234-gocache", "linux/amd64"), "image api", never)
	if err != nil {
		t.Fatal(err)
	}
	for _, lane := range []string{laneOf("b", "api-app-1234-gocache", "linux/amd64"), laneOf("a", "api-app-1234-gocache", "linux/arm64")} {
		release, err := l.acquire(ctx, lane, "image other", never)
		if err != nil {
			t.Fatal(err)
		}
		release()
	}
	// The same lane waits, naming the holder, until it is released.
	queued := make(chan string, 1)
	got := make(chan error)
	go func() {
		release, err := l.acquire(ctx, laneOf("a", "api-app-1234-gocache", "linux/amd64"), "image web", func(h string) { queued <- h })
		if err == nil {
			release()
		}
		got <- err
	}()
	select {
	case h := <-queued:
		if h != "image api" {
			t.Errorf("waited for %q, want image api", h)
		}
	case err := <-got:
		t.Fatalf("a second build took a held lane (err %v)", err)
	}
	held()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if len(l.held) != 0 || len(l.count) != 0 {
		t.Errorf("lanes left behind: %v %v", l.held, l.count)
	}
}

// TestWarmRunsInALaneAreSeenByJobs: a builder Job of a lane learns from
// this process's memory that another image's warm build of the lane has
// not ended (started, queued or running), and that every build of a
// warm builder it ran ended, so status saying one runs is older than
// that; a warm builder it never ran a build in is not known ended.
func TestWarmRunsInALaneAreSeenByJobs(t *testing.T) {
	w := newWarmBuilds()
	lane := laneOf("a", "gpu-operator-src-1234-gocache", "linux/amd64")
	env := &v1alpha1.DevEnvironment{}
	env.Namespace, env.Name = "a", "gpu-operator"
	release := make(chan struct{})
	run := w.start("uid-1/inputs", "uid-1", env, warmPlan{
		claim: WarmStep{Name: WarmStepClaim}, lane: lane, holder: "image gpu-operator",
		image: "gpu-operator", builder: "a/gpu-operator-warm", timeout: time.Minute,
	}, func(ctx context.Context, _ WarmStep, _, _ io.Writer) error {
		<-release
		return errors.New("the build stopped")
	})
	if other, pod, ok := w.runningIn(lane, "nvidia-validator"); !ok || other != "gpu-operator" || pod != "gpu-operator-warm" {
		t.Errorf("a running warm build of the lane: got %q %q %v", other, pod, ok)
	}
	if _, _, ok := w.runningIn(lane, "gpu-operator"); ok {
		t.Error("runningIn counts the image it was asked to leave out")
	}
	if _, _, ok := w.runningIn(laneOf("b", "gpu-operator-src-1234-gocache", "linux/amd64"), "nvidia-validator"); ok {
		t.Error("a warm build holds back a lane of another namespace")
	}
	if w.sawEnd("a", "gpu-operator-warm") {
		t.Error("a running warm build seen ended")
	}
	close(release)
	deadline := time.Now().Add(time.Minute)
	for !run.finished() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !run.finished() {
		t.Fatal("the warm build did not end")
	}
	if _, _, ok := w.runningIn(lane, "nvidia-validator"); ok {
		t.Error("an ended warm build still holds the lane")
	}
	if !w.sawEnd("a", "gpu-operator-warm") {
		t.Error("the ended warm build is not seen ended")
	}
	if w.sawEnd("a", "another-warm") {
		t.Error("a warm builder this process never ran a build in is seen ended")
	}
}

// TestABackendWithoutItsTurnStartsNoBuilder: the turn on the build cache
// claim comes only from the takingTurns decorator; a backend reached
// without it (not through backendFor) is refused, not let through.
func TestABackendWithoutItsTurnStartsNoBuilder(t *testing.T) {
	b := &imageBuild{img: &v1alpha1.ImageSpec{Name: "api"}}
	if _, err := b.waitTurn(context.Background(), "linux/amd64"); err == nil {
		t.Error("a build without a turn on its claim may start a builder")
	}
}

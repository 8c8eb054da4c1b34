package build

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/pods"
)

// Lanes: the builders of the images sharing one build cache claim
// (pods.ImageCacheShare) compile one at a time per platform, whatever
// builds them. Go's build cache is safe for concurrent use, but three
// builds of one tree started together each compile the whole dependency
// graph side by side on the same cores, none finding what the others have
// not written yet; one after the other, the first compiles it and the
// others only their own packages and the link. A lane is (claim,
// platform): builds for other platforms compile other objects and may run
// at once.
//
// The turn is a policy around every backend, like the others
// (takingTurns, below): a backend asks it before it starts a builder, and
// only the decorator hands it one, so no backend starts one unasked.
//
// Who waits for whom (issue 42: GPU Operator's warm-built operator and
// Job-built validator compiled k8s.io/api side by side), whatever the
// mix, one image moved from one backend to the other included:
//   - a builder Job waits while a builder Job of the lane that it does
//     not replace runs (another image's: a new Job of an image deletes
//     its earlier ones), while a warm build of the lane runs, its own
//     image's too (busyWarmBuild), and while a test Job of the claim runs;
//   - a warm build waits, before it starts, while a builder Job of the
//     lane (its own image's too) or a test Job of the claim runs, and
//     after it starts, in memory, for the lane's other warm builds (lanes
//     below; its own image's earlier build is stopped by its claim).
//
// What says a builder Job runs is the Job; what says a warm build runs is
// the image's status (Build.Result Running, written when it starts, kept
// until it ends), as testrun's turns read it, so a restarted operator
// sees the same; this process's own memory of its warm builds only adds
// what status may not say yet (a build started in this reconcile whose
// status write was lost) and drops what status still says of a build it
// saw end.

// LabelBuildCache on a builder Job or warm builder pod names the build
// cache claim it mounts: the lane's other Jobs (and the test Jobs of the
// claim) are found by it.
const LabelBuildCache = pods.LabelBuildCache

// takingTurns hands the backend its image's turn on the cache claim's
// lanes (backendFor wraps every backend in it). In-process builds start
// no builder and never ask.
type takingTurns struct {
	s    *imageBuilds
	next backend
}

func (d takingTurns) build(ctx context.Context, b *imageBuild) (built, error) {
	b.turn = &turn{s: d.s, img: b.img, claim: d.s.cacheClaimOf(b.img)}
	return d.next.build(ctx, b)
}

// turn is one image build's place in its claim's lanes.
type turn struct {
	s     *imageBuilds
	img   *v1alpha1.ImageSpec
	claim string
}

// wait names what a builder of the image for platform waits for before
// it may start ("" when it is its turn).
func (t *turn) wait(ctx context.Context, platform string) (string, error) {
	return t.s.busyLane(ctx, t.img, platform, t.claim)
}

// lane is the lane a warm build for platform holds in memory while it
// runs ("" without a claim).
func (t *turn) lane(platform string) string { return laneOf(t.s.env.Namespace, t.claim, platform) }

// waitTurn is wait for a backend: one reached without takingTurns
// starts no builder.
func (b *imageBuild) waitTurn(ctx context.Context, platform string) (string, error) {
	if b.turn == nil {
		return "", fmt.Errorf("image %s: built outside backendFor, without a turn on its build cache claim", b.img.Name)
	}
	return b.turn.wait(ctx, platform)
}

// laneOf is the lane of a build on claim in namespace for platform (""
// without a claim: no lane, no waiting). Claim names repeat across
// namespaces; lanes do not.
func laneOf(namespace, claim, platform string) string {
	if claim == "" {
		return ""
	}
	return namespace + "/" + claim + "/" + platform
}

// busyLane names what img's build for platform on claim waits for ("" when
// nothing): another image's builder Job of the lane, a warm build of the
// lane (only when img is built by Jobs: warm builds queue for one another
// in memory), or a test Job of the claim. A Job's end is an event on an
// owned Job and a warm build's end wakes the environment, so the build
// starts on the reconcile after.
func (s *imageBuilds) busyLane(ctx context.Context, img *v1alpha1.ImageSpec, platform, claim string) (string, error) {
	if claim == "" {
		return "", nil
	}
	busy, err := s.busyLaneJob(ctx, img, platform, claim)
	if err != nil || busy != "" {
		return busy, err
	}
	if !img.Run.KeepWarm {
		if busy := s.busyWarmBuild(img, platform, claim); busy != "" {
			return busy, nil
		}
	}
	return s.busyTestJob(ctx, img, claim)
}

// busyLaneJob names an unfinished builder Job in the lane of img's build
// for platform ("" when none): another image's, or img's own when img is
// now built warm (a builder Job of img deletes its earlier ones; a warm
// build stops none). The API server is asked, not the cache, so a Job
// created earlier in this reconcile is seen.
func (s *imageBuilds) busyLaneJob(ctx context.Context, img *v1alpha1.ImageSpec, platform, claim string) (string, error) {
	if claim == "" || s.e.APIReader == nil {
		return "", nil
	}
	jobs := &batchv1.JobList{}
	if err := s.e.APIReader.List(ctx, jobs, client.InNamespace(s.env.Namespace), client.MatchingLabels{
		v1alpha1.LabelEnvironment: v1alpha1.LabelValue(s.env.Name), v1alpha1.LabelRole: v1alpha1.RoleBuild, LabelBuildCache: claim,
		v1alpha1.LabelPlatform: v1alpha1.LabelValue(strings.ReplaceAll(platform, "/", "-")),
	}); err != nil {
		return "", err
	}
	for i := range jobs.Items {
		job := &jobs.Items[i]
		replaces := !img.Run.KeepWarm && job.Labels[v1alpha1.LabelImage] == v1alpha1.LabelValue(img.Name)
		if replaces || !metav1.IsControlledBy(job, s.env) ||
			!job.DeletionTimestamp.IsZero() || jobEnded(job) {
			continue
		}
		return fmt.Sprintf("image %s waits for builder job %s (image %s), which shares build cache claim %s: one compile at a time",
			img.Name, job.Name, job.Labels[v1alpha1.LabelImage], claim), nil
	}
	return "", nil
}

// busyWarmBuild names a running warm build in the lane of img's build
// for platform, img's own included ("" when none): one this process runs or
// queues, or one status says runs (an earlier operator process's, which
// the next reconcile of its image adopts) unless this process saw every
// build of that warm builder end, or the build started longer ago than
// its run.timeout allows (the helper stops it there; its image's
// component may not be reconciled again soon to say so, e.g. while it
// waits for img's). It asks for a look again soon: status read before
// the warm image's own step may still say Running after its end woke the
// environment.
func (s *imageBuilds) busyWarmBuild(img *v1alpha1.ImageSpec, platform, claim string) string {
	lane := laneOf(s.env.Namespace, claim, platform)
	if lane == "" {
		return ""
	}
	warm := s.e.warmBuilds()
	say := func(other, pod string) string {
		s.next.RequeueWithin(runningTailInterval)
		return fmt.Sprintf("image %s waits for the build of image %s in warm builder %s, which shares build cache claim %s: one compile at a time",
			img.Name, other, pod, claim)
	}
	// img's own warm build counts too: img was built warm until its
	// spec said otherwise, and a builder Job stops no warm build.
	if other, pod, ok := warm.runningIn(lane, ""); ok {
		return say(other, pod)
	}
	for _, c := range s.env.Spec.Components {
		st := s.env.Status.Component(c.Name)
		for i := range c.Images {
			other := &c.Images[i]
			own := other.Name == img.Name
			if other.Run == nil || (!own && !other.Run.KeepWarm) || st == nil ||
				!slices.Contains(other.BuildPlatforms(), platform) || s.cacheClaimOf(other) != claim {
				continue
			}
			ist := st.Image(other.Name)
			if ist == nil || ist.Build == nil || ist.Build.Result != v1alpha1.BuildRunning || ist.Build.StartTime == nil ||
				(own && ist.Build.Job != WarmPodName(s.env.Name, img.Name, platform)) ||
				time.Since(ist.Build.StartTime.Time) > s.e.buildTimeout(other.Run)+warmGrace(s.e.buildTimeout(other.Run)) ||
				warm.sawEnd(s.env.Namespace, ist.Build.Job) {
				continue
			}
			return say(other.Name, ist.Build.Job)
		}
	}
	return ""
}

// busyTestJob names a running test Job of the claim ("" when none): a
// suite on its images' claim compiles what they compile (testrun waits
// for their builder Jobs the same way).
func (s *imageBuilds) busyTestJob(ctx context.Context, img *v1alpha1.ImageSpec, claim string) (string, error) {
	if claim == "" || s.e.APIReader == nil {
		return "", nil
	}
	jobs := &batchv1.JobList{}
	if err := s.e.APIReader.List(ctx, jobs, client.InNamespace(s.env.Namespace), client.MatchingLabels{
		v1alpha1.LabelEnvironment: v1alpha1.LabelValue(s.env.Name), v1alpha1.LabelRole: v1alpha1.RoleTest, LabelBuildCache: claim,
	}); err != nil {
		return "", err
	}
	for i := range jobs.Items {
		job := &jobs.Items[i]
		if !metav1.IsControlledBy(job, s.env) || !job.DeletionTimestamp.IsZero() || jobEnded(job) {
			continue
		}
		return fmt.Sprintf("image %s waits for test job %s (suite %s), which shares build cache claim %s: one compile at a time",
			img.Name, job.Name, job.Labels[v1alpha1.LabelSuite], claim), nil
	}
	return "", nil
}

// jobEnded is a Job that completed or failed.
func jobEnded(job *batchv1.Job) bool { return pods.JobEnded(job) }

// lanes serialize warm builds in memory: a warm build holds its lane
// from its claim step to its end (the build's timeout counts from the
// claim, so time spent waiting for the lane is not the build's). A
// restarted operator forgets them: the warm builds it starts again may
// then run side by side once, which costs time, not correctness (each is
// its own build of its own inputs). Builder Jobs do not queue here: they
// wait for a warm build of the lane as status says it runs
// (busyWarmBuild).
type lanes struct {
	mu    sync.Mutex
	held  map[string]*lane
	count map[string]int
}

// lane is one lane's token (a one-slot channel) and who holds it.
type lane struct {
	slot   chan struct{}
	holder string
}

func newLanes() *lanes {
	return &lanes{held: map[string]*lane{}, count: map[string]int{}}
}

// acquire waits for key's lane as holder (a name for status: "image
// X"), until ctx ends; waiting is told what it waits for. It returns the
// release.
func (l *lanes) acquire(ctx context.Context, key, holder string, waiting func(string)) (func(), error) {
	if key == "" {
		return func() {}, nil
	}
	l.mu.Lock()
	ln := l.held[key]
	if ln == nil {
		ln = &lane{slot: make(chan struct{}, 1)}
		l.held[key] = ln
	}
	l.count[key]++
	l.mu.Unlock()
	done := func() {
		l.mu.Lock()
		if l.count[key]--; l.count[key] == 0 {
			delete(l.count, key)
			delete(l.held, key)
		}
		l.mu.Unlock()
	}
	select {
	case ln.slot <- struct{}{}:
	default:
		l.mu.Lock()
		other := ln.holder
		l.mu.Unlock()
		waiting(other)
		select {
		case ln.slot <- struct{}{}:
		case <-ctx.Done():
			done()
			return nil, ctx.Err()
		}
	}
	l.mu.Lock()
	ln.holder = holder
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		ln.holder = ""
		l.mu.Unlock()
		<-ln.slot
		done()
	}, nil
}

// setHolder names who now holds key's lane (a handed-over hold).
func (l *lanes) setHolder(key, holder string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ln := l.held[key]; ln != nil {
		ln.holder = holder
	}
}

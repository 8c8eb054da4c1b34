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
// Who waits for whom (issue 42: GPU Operator's warm-built operator and
// Job-built validator compiled k8s.io/api side by side):
//   - a builder Job waits while another image's builder Job of the lane
//     runs, while a warm build of the lane runs (busyWarmBuild), and while
//     a test Job of the claim runs;
//   - a warm build waits, before it starts, while a builder Job of the
//     lane or a test Job of the claim runs, and after it starts, in
//     memory, for the lane's other warm builds (lanes below).
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

// busyLaneJob names the unfinished builder Job of another image in the
// lane of img's build for platform ("" when none). The API server is
// asked, not the cache, so a Job created earlier in this reconcile is
// seen.
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
		if job.Labels[v1alpha1.LabelImage] == v1alpha1.LabelValue(img.Name) || !metav1.IsControlledBy(job, s.env) ||
			!job.DeletionTimestamp.IsZero() || jobEnded(job) {
			continue
		}
		return fmt.Sprintf("image %s waits for builder job %s (image %s), which shares build cache claim %s: one compile at a time",
			img.Name, job.Name, job.Labels[v1alpha1.LabelImage], claim), nil
	}
	return "", nil
}

// busyWarmBuild names a running warm build of another image in the lane
// of img's build for platform ("" when none): one this process runs or
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
	if other, pod, ok := warm.runningIn(lane, img.Name); ok {
		return say(other, pod)
	}
	for _, c := range s.env.Spec.Components {
		st := s.env.Status.Component(c.Name)
		for i := range c.Images {
			other := &c.Images[i]
			if other.Name == img.Name || other.Run == nil || !other.Run.KeepWarm || st == nil ||
				!slices.Contains(other.BuildPlatforms(), platform) || s.cacheClaimOf(other) != claim {
				continue
			}
			ist := st.Image(other.Name)
			if ist == nil || ist.Build == nil || ist.Build.Result != v1alpha1.BuildRunning || ist.Build.StartTime == nil ||
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

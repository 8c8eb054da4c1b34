package build

import (
	"context"
	"fmt"
	"strings"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/pods"
)

// Lanes: the builders of the images sharing one build cache claim
// (pods.ImageCacheShare) compile one at a time per platform. Go's build
// cache is safe for concurrent use, but three builds of one tree started
// together each compile the whole dependency graph side by side on the
// same cores, none finding what the others have not written yet; one
// after the other, the first compiles it and the others only their own
// packages and the link. A lane is (claim, platform): builds for other
// platforms compile other objects and may run at once.

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

// busyLaneJob names the unfinished builder Job of another image in the
// lane of img's build for platform, or else a test Job of a suite on the
// claim (any platform: it compiles on the same cores), ("" when none):
// img's Job starts after it ends (its end is an event on an owned Job,
// which reconciles the environment). The API server is asked, not the
// cache, so a Job created earlier in this reconcile is seen.
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
	return s.busyTestJob(ctx, img, claim)
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
// restarted operator forgets them: the builds it starts again may then
// run side by side once, which costs time, not correctness (each is its
// own build of its own inputs).
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

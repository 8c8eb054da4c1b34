package build

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/internal/identity"
	"github.com/devloop-dev/devloop/internal/image"
	"github.com/devloop-dev/devloop/internal/memo"
	"github.com/devloop-dev/devloop/internal/pods"
)

// A builder Job whose fetch or assemble container found the registry down
// (ExitUnavailable) did not fail the build: the environment waits
// (Unavailable), and the failed Job, named after the inputs, is replaced
// by a new one after a delay, so the build heals by itself once the
// registry is back. Before, the failed Job was read again on every
// reconcile and the environment stalled until someone deleted it.

// Delays before a builder Job that found the registry down is replaced:
// doubled per Job of the same name that failed so in a row, at most
// jobRetryMaxDelay so the build starts again soon after the registry
// returns.
const (
	jobRetryDelay    = 5 * time.Second
	jobRetryMaxDelay = 20 * time.Second
)

// failuresInARow is one count of memo.Counts: of what (a builder Job's
// UID, a registry host), how many in a row, and when the first and the
// last were counted. In memory only: a restarted operator starts again
// from the shortest delay.
type failuresInARow struct {
	of          string
	count       int
	first, last time.Time
}

// countJobFailure counts job, once, among the builder Jobs of its name
// that failed in a row, and returns how many did.
func (s *imageBuilds) countJobFailure(job *batchv1.Job) int {
	return s.e.jobFailures.Update(jobFailuresKey(s.env, job.Name), func(f failuresInARow, _ bool) failuresInARow {
		if f.of != string(job.UID) {
			f.of, f.count = string(job.UID), f.count+1
		}
		return f
	}).count
}

// jobFailuresKey is the count of builder Job name of env.
func jobFailuresKey(env *v1alpha1.DevEnvironment, name string) string {
	return memo.Key(env.UID, "job/"+name)
}

// jobRetryDelayAfter is how long after the failures-th failure in a row a
// builder Job is replaced.
func jobRetryDelayAfter(failures int) time.Duration {
	d := jobRetryDelay
	for i := 1; i < failures && d < jobRetryMaxDelay; i++ {
		d *= 2
	}
	return min(d, jobRetryMaxDelay)
}

// registryDownInJob reports whether o is a builder Job stopped by a
// registry down: devloop's own fetch or assemble step said so by its exit
// code (the build command's codes are the author's, not looked at).
func registryDownInJob(o JobOutcome) bool {
	return o.ExitCode != nil && (*o.ExitCode == ExitUnavailable || *o.ExitCode == ExitNoSuchHost) &&
		(o.FailedContainer == pods.ContainerFetch || o.FailedContainer == ContainerAssemble)
}

// unavailableIn is the error of a helper step that found the registry
// down (code ExitUnavailable) or its host not resolving (ExitNoSuchHost,
// counted by noSuchHosts): the assemble or push step's registry is the
// environment's, or the image's base.
func (s *imageBuilds) unavailableIn(img *v1alpha1.ImageSpec, code *int32, msg string) error {
	err := errors.New(msg)
	if code == nil || *code != ExitNoSuchHost {
		return fault.Unavailable(err)
	}
	host := s.env.Spec.Registry.Prefix
	if i := strings.IndexByte(host, '/'); i >= 0 {
		host = host[:i]
	}
	return image.NewNoSuchHostError(host, "spec.registry.prefix (or the image's base)", err)
}

// retryBuilderJob records a builder Job stopped by a registry down and
// waits: once the delay since its failure is over, the Job is deleted,
// and the next reconcile starts it again.
func (s *imageBuilds) retryBuilderJob(ctx context.Context, img *v1alpha1.ImageSpec, ist *v1alpha1.ImageStatus, job *batchv1.Job, o JobOutcome) error {
	justEnded := ist.Build.Result == v1alpha1.BuildRunning
	ist.Build.Result, ist.Build.ExitCode = v1alpha1.BuildFailed, o.ExitCode
	failedAt := jobFailedAt(job)
	ist.Build.CompletionTime = &metav1.Time{Time: failedAt}
	if (justEnded || ist.Build.LogTail == "") && o.Pod != "" {
		ist.Build.LogTail = s.logTail(ctx, o.Pod, o.FailedContainer)
	}
	delay := jobRetryDelayAfter(s.countJobFailure(job))
	// A message that does not change from one reconcile to the next:
	// status is written only when something changed.
	msg := fmt.Sprintf("image %s: the registry was unavailable to container %s of builder job %s", img.Name, o.FailedContainer, job.Name)
	if last := lastBuildLine(ist.Build.LogTail); last != "" {
		msg += ": " + last
	}
	msg += fmt.Sprintf("; the build starts again %s after it stopped", delay)
	if time.Since(failedAt) < delay {
		return s.unavailableIn(img, o.ExitCode, msg)
	}
	tenant, err := s.tenant.Client()
	if err != nil {
		return err
	}
	log.FromContext(ctx).Info("the registry was unavailable to a builder job; replacing it", "job", job.Name, "container", o.FailedContainer)
	if err := tenant.Delete(ctx, job, client.Preconditions{UID: &job.UID}, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil &&
		!apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return identity.Refused(err, "delete builder job "+job.Name)
	}
	return s.unavailableIn(img, o.ExitCode, msg)
}

// jobFailedAt is when job failed (a failed Job has no completion time).
func jobFailedAt(job *batchv1.Job) time.Time {
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time
		}
	}
	if job.Status.CompletionTime != nil {
		return job.Status.CompletionTime.Time
	}
	return time.Now()
}

// retryTimedOutJob records a builder Job stopped at its deadline
// (run.timeout) and tries the build again after a delay, as for a warm
// build: it was stalled until the spec changed, though the cache the
// attempt filled makes the next one shorter. It returns the status
// message: how long the Job ran and when it is tried again.
func (s *imageBuilds) retryTimedOutJob(ctx context.Context, img *v1alpha1.ImageSpec, ist *v1alpha1.ImageStatus, job *batchv1.Job, o JobOutcome) (string, error) {
	justEnded := ist.Build.Result == v1alpha1.BuildRunning
	ist.Build.Result, ist.Build.ExitCode = v1alpha1.BuildFailed, nil
	failedAt := jobFailedAt(job)
	ist.Build.CompletionTime = &metav1.Time{Time: failedAt}
	if (justEnded || ist.Build.LogTail == "") && o.Pod != "" {
		ist.Build.LogTail = s.logTail(ctx, o.Pod, ContainerBuild)
	}
	ran := time.Duration(0)
	if job.Status.StartTime != nil {
		ran = failedAt.Sub(job.Status.StartTime.Time).Round(time.Second)
	}
	timeout := s.e.buildTimeout(img.Run)
	attempt := s.countJobFailure(job)
	delay := retryDelay(timeout, attempt)
	// Constant from one reconcile to the next: status is written only
	// when something changed.
	msg := fmt.Sprintf("image %s: builder job %s ran %s, past run.timeout (%s): trying again %s after it stopped (attempt %d)",
		img.Name, job.Name, ran, timeout, delay, attempt+1)
	if wait := time.Until(failedAt.Add(delay)); wait > 0 {
		s.next.RequeueWithin(wait)
		return msg, nil
	}
	tenant, err := s.tenant.Client()
	if err != nil {
		return "", err
	}
	log.FromContext(ctx).Info("builder job timed out; trying again", "job", job.Name, "ran", ran, "timeout", timeout, "attempt", attempt+1)
	if err := tenant.Delete(ctx, job, client.Preconditions{UID: &job.UID}, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil &&
		!apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return "", identity.Refused(err, "delete builder job "+job.Name)
	}
	s.next.Poll = true
	return msg, nil
}

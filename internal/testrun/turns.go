package testrun

import (
	"context"
	"fmt"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/pods"
)

// Turns (issue 34: no two builders of one environment compile the same
// package at the same time): a suite on the build cache claim of its
// images (pods.SuiteCacheShare) compiles what their builders compile, on
// the same cores. Its run therefore starts only while no builder Job of
// the claim runs, and a builder Job of the claim waits while the suite's
// Job runs (the build engine's busyLaneJob finds it by
// pods.LabelBuildCache). Run after the builds, the suite finds what they
// compiled. The state is the Jobs in the cluster: a Job's end is an event
// on an owned object, which reconciles the environment, and a restarted
// operator sees the same. A warm builder's build (run.keepWarm) has no
// Job: the suite waits while status says it runs, and the build engine
// starts one only while no suite Job of the claim runs.

// busyBuilder names the running builder Job of the claim suite shares
// with its images ("" when none, or when the suite has a claim of its
// own). The API server is asked, not the cache, so a builder Job created
// earlier in this reconcile (the build step runs before the tests step)
// is seen.
func (p *testPass) busyBuilder(ctx context.Context, suite *v1alpha1.TestSuite) (string, error) {
	share, ok := pods.SuiteCacheShare(p.env, suite)
	if !ok || p.e.APIReader == nil {
		return "", nil
	}
	jobs := &batchv1.JobList{}
	if err := p.e.APIReader.List(ctx, jobs, client.InNamespace(p.env.Namespace), client.MatchingLabels{
		v1alpha1.LabelEnvironment: v1alpha1.LabelValue(p.env.Name), v1alpha1.LabelRole: v1alpha1.RoleBuild, pods.LabelBuildCache: share.Claim,
	}); err != nil {
		return "", fmt.Errorf("listing builder jobs of build cache claim %s: %w", share.Claim, err)
	}
	for i := range jobs.Items {
		job := &jobs.Items[i]
		if !metav1.IsControlledBy(job, p.env) || !job.DeletionTimestamp.IsZero() || pods.JobEnded(job) {
			continue
		}
		return fmt.Sprintf("builder job %s (image %s), which shares build cache claim %s: one compile at a time",
			job.Name, job.Labels[v1alpha1.LabelImage], share.Claim), nil
	}
	// A warm builder's build has no Job: status, which the build step
	// wrote earlier in this reconcile, says it runs; its end wakes the
	// environment.
	for _, c := range p.env.Status.Components {
		for _, img := range c.Images {
			if b := img.Build; b != nil && b.Result == v1alpha1.BuildRunning && slices.Contains(share.Images, img.Name) {
				return fmt.Sprintf("the build of image %s (in %s), which shares build cache claim %s: one compile at a time",
					img.Name, b.Job, share.Claim), nil
			}
		}
	}
	return "", nil
}

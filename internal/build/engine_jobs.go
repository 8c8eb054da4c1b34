package build

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/internal/identity"
	"github.com/devloop-dev/devloop/internal/image"
	"github.com/devloop-dev/devloop/internal/plan"
	"github.com/devloop-dev/devloop/internal/pods"
	"github.com/devloop-dev/devloop/internal/source"
	"github.com/devloop-dev/devloop/internal/timeline"
)

// logTailBytes bounds the log tail a failed build leaves in status: the
// schema's bound, so what is written is what the next reconcile compares.
const logTailBytes = v1alpha1.MaxBuildLogTail

// builderJobs is the backend of an image with a run step: one builder Job
// per platform. The Jobs are named after the inputs, so the same inputs
// never run twice and a restarted operator finds the Job it created. The
// image is published (index and tags) once every platform pushed; a Job
// that reported a platform image the registry lost (b.missing) is
// replaced.
type builderJobs struct{ s *imageBuilds }

func (j builderJobs) build(ctx context.Context, b *imageBuild) (built, error) {
	res, waiting, err := j.s.buildWithJobs(ctx, b)
	return built{result: res, waiting: waiting}, err
}

// buildWithJobs is builderJobs' build: a result once every platform image
// is pushed and tagged, nil and what it waits for while Jobs run.
func (s *imageBuilds) buildWithJobs(ctx context.Context, b *imageBuild) (*image.Result, string, error) {
	img, ist, spec, ref, inputs, tags, missing := b.img, b.ist, b.spec, b.ref, b.inputs, b.tags, b.missing
	if err := s.e.needHelperImage(img); err != nil {
		return nil, "", err
	}
	digests := map[string]v1.Hash{}
	var outputs []image.OutputReport
	var running, waiting, disrupted []string
	for _, p := range img.BuildPlatforms() {
		jobName := builderJobName(s.env.Name, img.Name, p, inputs)
		job := &batchv1.Job{}
		err := s.e.Cache.Get(ctx, types.NamespacedName{Namespace: s.env.Namespace, Name: jobName}, job)
		if apierrors.IsNotFound(err) {
			busy, err := b.waitTurn(ctx, p)
			if err != nil {
				return nil, "", err
			}
			if busy != "" {
				waiting = append(waiting, busy)
				continue
			}
			if err := s.startBuilderJob(ctx, img, spec, ref, p, jobName); err != nil {
				return nil, "", err
			}
			ist.Build = &v1alpha1.BuildStatus{Job: jobName, Result: v1alpha1.BuildRunning, StartTime: &metav1.Time{Time: metav1.Now().Time}}
			running = append(running, jobName)
			continue
		}
		if err != nil {
			return nil, "", err
		}
		if !metav1.IsControlledBy(job, s.env) {
			return nil, "", notOurs("builder Job", jobName)
		}
		jobPods := &corev1.PodList{}
		if err := s.e.APIReader.List(ctx, jobPods, client.InNamespace(s.env.Namespace), client.MatchingLabels{batchv1.JobNameLabel: jobName}); err != nil {
			return nil, "", err
		}
		// Only this Job's pods: a Job of the same name deleted before it
		// (the registry lost its image) may leave pods behind for a while.
		ours := jobPods.Items[:0]
		for _, pod := range jobPods.Items {
			if metav1.IsControlledBy(&pod, job) {
				ours = append(ours, pod)
			}
		}
		outcome, err := ReadJob(job, ours)
		if err != nil {
			return nil, "", err
		}
		if outcome.Finished {
			s.forgetDisruption(job)
		}
		if ist.Build == nil || ist.Build.Job != jobName {
			ist.Build = &v1alpha1.BuildStatus{Job: jobName, Result: v1alpha1.BuildRunning, StartTime: job.Status.StartTime}
		}
		switch {
		case !outcome.Finished:
			if msg, err := s.dropStrandedBuild(ctx, img, job, ours); err != nil || msg != "" {
				if err != nil {
					return nil, "", err
				}
				waiting = append(waiting, msg)
				continue
			}
			running = append(running, jobName)
			if note := s.jobDisruption(job, ours); note != "" {
				disrupted = append(disrupted, note)
			}
			s.refreshJobTail(ctx, img, ist, ours)
			if line := s.registryWaitIn(ctx, ours); line != "" {
				return nil, "", s.unavailableIn(img, nil, registryWaitMessage(img, jobName, line))
			}
		case !outcome.Succeeded && outcome.Reason == batchv1.JobReasonDeadlineExceeded:
			msg, err := s.retryTimedOutJob(ctx, img, ist, job, outcome)
			if err != nil {
				return nil, "", err
			}
			waiting = append(waiting, msg)
		case !outcome.Succeeded:
			return nil, "", s.builderJobFailed(ctx, img, ist, job, outcome)
		default:
			h, err := v1.NewHash(outcome.Report.Digest)
			if err != nil {
				return nil, "", fmt.Errorf("builder job %s reported digest %q: %w", jobName, outcome.Report.Digest, err)
			}
			if missing {
				gone, err := s.reportGone(ctx, img, outcome.Report)
				if err != nil {
					return nil, "", err
				}
				if gone {
					if err := s.removeBuilderJob(ctx, job); err != nil {
						return nil, "", err
					}
					running = append(running, jobName)
					continue
				}
			}
			s.e.jobFailures.Delete(jobFailuresKey(s.env, jobName))
			digests[p] = h
			if len(outcome.Report.Outputs) > 0 {
				outputs = outcome.Report.Outputs
			}
		}
	}
	if len(running) > 0 {
		msg := fmt.Sprintf("building image %s in job %s", img.Name, strings.Join(running, ", ")) + s.jobProgress(img.Name, running).String()
		if len(disrupted) > 0 {
			msg += ": " + disrupted[0]
		}
		waiting = append(waiting, msg)
	}
	if len(waiting) > 0 {
		return nil, strings.Join(waiting, "; "), nil
	}
	res, err := s.publishBuilt(ctx, img, ist, digests, outputs, tags)
	return res, "", err
}

// removeBuilderJob deletes a builder Job whose pushed image the registry
// lost, so the next reconcile starts it again.
func (s *imageBuilds) removeBuilderJob(ctx context.Context, job *batchv1.Job) error {
	tenant, err := s.tenant.Client()
	if err != nil {
		return err
	}
	log.FromContext(ctx).Info("the registry lost what a builder job pushed; running it again", "job", job.Name)
	if err := tenant.Delete(ctx, job, client.Preconditions{UID: &job.UID}, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil &&
		!apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return identity.Refused(err, "delete builder job "+job.Name)
	}
	return nil
}

// dropStrandedBuild removes a builder Job whose pod cannot be scheduled
// because its cache claim's volume is bound to a node that takes no pods
// now (drained, gone), and the claim with it where a new claim follows
// the next pod (pods.DropStrandedClaim): the next reconcile starts the
// Job again with a fresh claim on a node that can run it. It returns what
// status says then, "" when the Job is not stranded.
func (s *imageBuilds) dropStrandedBuild(ctx context.Context, img *v1alpha1.ImageSpec, job *batchv1.Job, jobPods []corev1.Pod) (string, error) {
	claim := s.cacheClaimOf(img)
	if claim == "" {
		return "", nil
	}
	why := ""
	for i := range jobPods {
		if why = pods.StrandedByVolume(&jobPods[i]); why != "" {
			break
		}
	}
	if why == "" {
		return "", nil
	}
	tenant, err := s.tenant.Client()
	if err != nil {
		return "", err
	}
	msg, dropped, err := pods.DropStrandedClaim(ctx, tenant, s.env.Namespace, s.env.UID, claim, "build cache claim", why)
	if err != nil || msg == "" {
		return "", err
	}
	if dropped {
		log.FromContext(ctx).Info("builder job stranded by its cache claim's node; starting again with a fresh cache", "job", job.Name, "claim", claim, "scheduler", why)
		if err := tenant.Delete(ctx, job, client.Preconditions{UID: &job.UID}, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil &&
			!apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return "", identity.Refused(err, "delete builder job "+job.Name)
		}
	}
	s.next.Poll = true // the claim's deletion is not watched
	return fmt.Sprintf("image %s: %s", img.Name, msg), nil
}

// needHelperImage refuses a run step when builder pods would have no
// helper image for devloop's own steps in them.
func (e *Engine) needHelperImage(img *v1alpha1.ImageSpec) error {
	if e.Options.HelperImage == "" {
		return fault.Stalled(v1alpha1.ReasonBuildFailed,
			fmt.Errorf("image %s has a run step, but this operator has no helper image for builder pods (--helper-image)", img.Name))
	}
	return nil
}

// publishBuilt tags the platform images builder pods pushed (an index for
// several) and the outputs they pushed, and records the build as
// succeeded.
func (s *imageBuilds) publishBuilt(ctx context.Context, img *v1alpha1.ImageSpec, ist *v1alpha1.ImageStatus,
	digests map[string]v1.Hash, outputs []image.OutputReport, tags *plan.TagTemplates) (*image.Result, error) {
	// The builder pods pushed the images (their Compile step); this is
	// the index and the tags.
	defer timeline.Mark(ctx, timeline.Push, time.Now())
	b, err := s.registry(ctx)
	if err != nil {
		return nil, err
	}
	res, err := b.Publish(ctx, img.Name, digests, tags.Render)
	if err != nil {
		return nil, buildError(img.Name, err)
	}
	if err := s.recordOutputs(ctx, img, ist, outputs, res.ContentHash); err != nil {
		return nil, err
	}
	ist.Build.Result = v1alpha1.BuildSucceeded
	ist.Build.ExitCode, ist.Build.LogTail = nil, ""
	markCompleted(ist.Build)
	return res, nil
}

// markCompleted stamps a build's end now, unless the recorded end is this
// build's (not before its start).
func markCompleted(b *v1alpha1.BuildStatus) {
	if b.CompletionTime == nil || b.CompletionTime.Before(b.StartTime) {
		b.CompletionTime = &metav1.Time{Time: metav1.Now().Time}
	}
}

// startBuilderJob replaces the image's previous builder Job for this
// platform with a new one. The previous one is kept until then so its logs
// stay readable.
func (s *imageBuilds) startBuilderJob(ctx context.Context, img *v1alpha1.ImageSpec, spec image.Spec, ref source.Ref, platform, jobName string) error {
	tenant, err := s.tenant.Client()
	if err != nil {
		return err
	}
	req, err := s.builderRequest(ctx, tenant, img, spec, ref, platform, jobName)
	if err != nil {
		return err
	}
	previous := client.MatchingLabels{}
	for k, v := range req.Labels {
		if k != LabelBuildCache { // a Job of before the claim was shared has none
			previous[k] = v
		}
	}
	if err := tenant.DeleteAllOf(ctx, &batchv1.Job{}, client.InNamespace(s.env.Namespace), previous,
		client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		return identity.Refused(err, "remove previous builder jobs of image "+img.Name)
	}
	job, err := BuilderJob(req)
	if err != nil {
		return err
	}
	log.FromContext(ctx).Info("starting builder job", "job", jobName, "image", img.Name, "platform", platform, "revision", ref.Revision)
	err = tenant.Create(ctx, job)
	if apierrors.IsAlreadyExists(err) {
		// The cache holds only Jobs labelled as devloop's builder and test
		// Jobs: a Job of this name it did not show is someone else's (or
		// lost its labels), and is not waited on as if it were the build.
		existing := &batchv1.Job{}
		if err := s.e.APIReader.Get(ctx, client.ObjectKeyFromObject(job), existing); err != nil {
			return err
		}
		if !metav1.IsControlledBy(existing, s.env) || existing.Labels[v1alpha1.LabelRole] != req.Labels[v1alpha1.LabelRole] {
			return notOurs("builder Job", jobName)
		}
		return nil
	}
	if err != nil {
		return identity.Refused(err, "create builder job "+jobName)
	}
	return nil
}

// builderRequest is what a builder (Job or warm pod) named name needs to
// build img for platform; it creates the image's cache claim.
func (s *imageBuilds) builderRequest(ctx context.Context, tenant client.Client, img *v1alpha1.ImageSpec,
	spec image.Spec, ref source.Ref, platform, name string) (JobRequest, error) {
	role := v1alpha1.RoleBuild
	if img.Run.KeepWarm {
		role = v1alpha1.RoleWarmBuild
	}
	req := JobRequest{
		Name: name, Namespace: s.env.Namespace, Owner: s.env.ControllerRef(),
		Labels: map[string]string{
			v1alpha1.LabelEnvironment: v1alpha1.LabelValue(s.env.Name), v1alpha1.LabelImage: v1alpha1.LabelValue(img.Name),
			v1alpha1.LabelPlatform: v1alpha1.LabelValue(strings.ReplaceAll(platform, "/", "-")), v1alpha1.LabelRole: role,
		},
		HelperImage: s.e.Options.HelperImage, MaxTimeout: s.e.Options.MaxBuildTimeout, Source: ref, Image: spec, Platform: platform, Run: *img.Run,
		Registry: image.Registry{Prefix: s.env.Spec.Registry.Prefix, Insecure: s.env.Spec.Registry.Insecure,
			Compression: s.e.Options.Compression},
	}
	req.SourceSecret = s.env.Spec.SourceSecretName(img.Source)
	req.GoPackages = goPackageDirs(img.Paths)
	if platforms := img.BuildPlatforms(); len(platforms) > 0 && platform == platforms[0] {
		// Outputs are packed once, by the first platform's builder.
		outputs, err := s.outputSpecs(img)
		if err != nil {
			return req, err
		}
		req.Outputs = outputs
	}
	if s.env.Spec.Registry.CredentialsRef != nil {
		req.RegistrySecret = s.env.Spec.Registry.CredentialsRef.Name
	}
	// Mounted only if the ServiceAccount may read them itself.
	for field, secret := range map[string]string{"the secretRef of source " + img.Source: req.SourceSecret, "spec.registry.credentialsRef": req.RegistrySecret} {
		var unreadable *pods.UnreadableSecretError
		if err := pods.CheckSecretsReadable(ctx, tenant, s.env.Namespace, secret); errors.As(err, &unreadable) {
			return req, fault.Stalledf(v1alpha1.ReasonBuildFailed, "image %s: %s: %v", img.Name, field, err)
		} else if err != nil {
			return req, err
		}
	}
	tc, err := s.teamCache(ctx)
	if err != nil {
		return req, err
	}
	req.TeamCache = tc
	if img.Run.Cache != nil {
		claim, err := s.ensureCacheClaim(ctx, tenant, img)
		if err != nil {
			return req, err
		}
		req.CacheClaim = claim
		// Builders of one claim take turns (lanes.go): the label finds
		// the other images' builder Jobs of the claim.
		req.Labels[LabelBuildCache] = claim
	}
	return req, nil
}

// builderJobFailed records a failed build in status and stalls the
// environment until the inputs change: the same inputs would fail again.
func (s *imageBuilds) builderJobFailed(ctx context.Context, img *v1alpha1.ImageSpec, ist *v1alpha1.ImageStatus, job *batchv1.Job, o JobOutcome) error {
	if registryDownInJob(o) {
		return s.retryBuilderJob(ctx, img, ist, job, o)
	}
	// The tail read while it ran may miss its last lines: read once more.
	justEnded := ist.Build.Result == v1alpha1.BuildRunning
	ist.Build.Result = v1alpha1.BuildFailed
	ist.Build.ExitCode = o.ExitCode
	ist.Build.CompletionTime = job.Status.CompletionTime
	if ist.Build.CompletionTime == nil {
		ist.Build.CompletionTime = &metav1.Time{Time: metav1.Now().Time}
	}
	what := "the build"
	if o.FailedContainer != "" {
		what = fmt.Sprintf("container %s", o.FailedContainer)
	}
	detail := o.Reason
	if o.ExitCode != nil {
		detail = fmt.Sprintf("exit code %d", *o.ExitCode)
	}
	if (justEnded || ist.Build.LogTail == "") && o.Pod != "" && o.FailedContainer != "" {
		ist.Build.LogTail = s.logTail(ctx, o.Pod, o.FailedContainer)
	}
	msg := fmt.Sprintf("image %s: build failed in job %s: %s ended with %s", img.Name, job.Name, what, detail)
	if last := lastBuildLine(ist.Build.LogTail); last != "" {
		msg += ": " + last
	}
	return fault.Stalled(v1alpha1.ReasonBuildFailed, errors.New(msg+" (kubectl logs job/"+job.Name+" -c "+o.FailedContainer+")"))
}

// logTail reads the end of a builder container's log as the tenant when
// LogsFor says how, or says why it cannot.
func (s *imageBuilds) logTail(ctx context.Context, pod, container string) string {
	out := pods.TailFor(ctx, s.e.LogsFor, s.e.Logs, s.tenant, s.env.Namespace, pod, container, 40)
	if len(out) > logTailBytes {
		out = out[len(out)-logTailBytes:]
	}
	return out
}

// ensureCacheClaim creates the build cache claim img shares with the
// images of its source and builder image (pods.ImageCacheShare) once; it
// outlives builds so the next build starts warm, and goes with the
// environment. A claim of that name this environment did not create is
// never used.
func (s *imageBuilds) ensureCacheClaim(ctx context.Context, tenant client.Client, img *v1alpha1.ImageSpec) (string, error) {
	share := s.cacheShare(img)
	ok, err := pods.EnsureCacheClaim(ctx, tenant, s.env, pods.CacheClaim{Name: share.Claim, What: "build cache claim", Size: share.Size,
		Labels: map[string]string{v1alpha1.LabelEnvironment: v1alpha1.LabelValue(s.env.Name), v1alpha1.LabelRole: v1alpha1.RoleBuildCache}})
	switch {
	case err != nil:
		return "", err
	case !ok:
		return "", notOurs("build cache claim", share.Claim)
	}
	s.removeUnusedCacheClaims(ctx, tenant, share.Claim)
	return share.Claim, nil
}

// cacheClaimOf is the build cache claim img's builders mount, "" for
// none.
func (s *imageBuilds) cacheClaimOf(img *v1alpha1.ImageSpec) string {
	return s.cacheShare(img).Claim
}

// cacheShare is the cache share of img, looked up as the spec writes it:
// the image a build is given is rendered, its run.image pinned to a
// digest, and the share is keyed by the spec's run.image.
func (s *imageBuilds) cacheShare(img *v1alpha1.ImageSpec) pods.CacheShare {
	for _, c := range s.env.Spec.Components {
		for i := range c.Images {
			if c.Images[i].Name == img.Name {
				share, _ := pods.ImageCacheShare(s.env, &c.Images[i])
				return share
			}
		}
	}
	return pods.CacheShare{}
}

// notOurs is the Stalled error of a builder this environment would use
// but did not create: it is never used, replaced or deleted.
func notOurs(what, name string) error {
	return fault.Stalledf(v1alpha1.ReasonBuildFailed,
		"%s %s exists and belongs to another owner: devloop neither uses nor replaces it (rename the image, or remove it)", what, name)
}

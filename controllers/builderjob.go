package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/internal/source"
)

// Labels on the objects the operator creates for an environment.
const (
	LabelEnvironment = "devloop.dev/environment"
	LabelImage       = "devloop.dev/image"
	LabelPlatform    = "devloop.dev/platform"
	LabelRole        = "devloop.dev/role"
)

// logTailBytes bounds the log tail a failed build leaves in status.
const logTailBytes = 2048

// LogReader reads the end of a container's log.
type LogReader interface {
	TailLog(ctx context.Context, namespace, pod, container string, lines int64) (string, error)
}

// buildWithJobs runs an image's run step in one builder Job per platform.
// The Jobs are named after the inputs, so the same inputs never run twice
// and a restarted operator finds the Job it created. It returns a result
// once every platform image is pushed and tagged, nil while Jobs run.
func (r *DevEnvironmentReconciler) buildWithJobs(ctx context.Context, s *scope, img *v1alpha1.ImageSpec, ist *v1alpha1.ImageStatus,
	spec build.Image, ref source.Ref, inputs string, render func(string) ([]string, error)) (*build.Result, string, error) {
	if err := r.needHelperImage(img); err != nil {
		return nil, "", err
	}
	digests := map[string]v1.Hash{}
	var running []string
	for _, p := range buildPlatforms(img) {
		jobName := builderJobName(s.env.Name, img.Name, p, inputs)
		job := &batchv1.Job{}
		err := r.Get(ctx, types.NamespacedName{Namespace: s.env.Namespace, Name: jobName}, job)
		if apierrors.IsNotFound(err) {
			if err := r.startBuilderJob(ctx, s, img, spec, ref, p, jobName); err != nil {
				return nil, "", err
			}
			ist.Build = &v1alpha1.BuildStatus{Job: jobName, Result: v1alpha1.BuildRunning, StartTime: &metav1.Time{Time: metav1.Now().Time}}
			running = append(running, jobName)
			continue
		}
		if err != nil {
			return nil, "", err
		}
		pods := &corev1.PodList{}
		if err := r.APIReader.List(ctx, pods, client.InNamespace(s.env.Namespace), client.MatchingLabels{batchv1.JobNameLabel: jobName}); err != nil {
			return nil, "", err
		}
		outcome, err := build.ReadJob(job, pods.Items)
		if err != nil {
			return nil, "", err
		}
		if ist.Build == nil || ist.Build.Job != jobName {
			ist.Build = &v1alpha1.BuildStatus{Job: jobName, Result: v1alpha1.BuildRunning, StartTime: job.Status.StartTime}
		}
		switch {
		case !outcome.Finished:
			running = append(running, jobName)
		case !outcome.Succeeded:
			return nil, "", r.builderJobFailed(ctx, s, img, ist, job, outcome)
		default:
			h, err := v1.NewHash(outcome.Report.Digest)
			if err != nil {
				return nil, "", fmt.Errorf("builder job %s reported digest %q: %w", jobName, outcome.Report.Digest, err)
			}
			digests[p] = h
		}
	}
	if len(running) > 0 {
		return nil, fmt.Sprintf("building image %s in job %s", img.Name, strings.Join(running, ", ")), nil
	}
	res, err := r.publishBuilt(ctx, s, img, ist, digests, render)
	return res, "", err
}

// needHelperImage refuses a run step when builder pods would have no
// helper image for devloop's own steps in them.
func (r *DevEnvironmentReconciler) needHelperImage(img *v1alpha1.ImageSpec) error {
	if r.Images.HelperImage == "" {
		return &StallingError{Reason: v1alpha1.ReasonBuildFailed,
			Err: fmt.Errorf("image %s has a run step, but this operator has no helper image for builder pods (--helper-image)", img.Name)}
	}
	return nil
}

// buildPlatforms are the platforms an image is built for.
func buildPlatforms(img *v1alpha1.ImageSpec) []string {
	if len(img.Platforms) == 0 {
		return []string{"linux/amd64"}
	}
	return img.Platforms
}

// publishBuilt tags the platform images builder pods pushed (an index for
// several) and records the build as succeeded.
func (r *DevEnvironmentReconciler) publishBuilt(ctx context.Context, s *scope, img *v1alpha1.ImageSpec, ist *v1alpha1.ImageStatus,
	digests map[string]v1.Hash, render func(string) ([]string, error)) (*build.Result, error) {
	b, err := r.builder(ctx, s)
	if err != nil {
		return nil, err
	}
	res, err := b.Publish(ctx, img.Name, digests, render)
	if err != nil {
		return nil, buildError(img.Name, err)
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
func (r *DevEnvironmentReconciler) startBuilderJob(ctx context.Context, s *scope, img *v1alpha1.ImageSpec, spec build.Image, ref source.Ref, platform, jobName string) error {
	tenant, err := r.tenant(s)
	if err != nil {
		return err
	}
	req, err := r.builderRequest(ctx, tenant, s, img, spec, ref, platform, jobName)
	if err != nil {
		return err
	}
	if err := tenant.DeleteAllOf(ctx, &batchv1.Job{}, client.InNamespace(s.env.Namespace), client.MatchingLabels(req.Labels),
		client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		return tenantError(err, "remove previous builder jobs of image "+img.Name)
	}
	job, err := build.BuilderJob(req)
	if err != nil {
		return err
	}
	log.FromContext(ctx).Info("starting builder job", "job", jobName, "image", img.Name, "platform", platform, "revision", ref.Revision)
	if err := tenant.Create(ctx, job); err != nil && !apierrors.IsAlreadyExists(err) {
		return tenantError(err, "create builder job "+jobName)
	}
	return nil
}

// builderRequest is what a builder (Job or warm pod) named name needs to
// build img for platform; it creates the image's cache claim.
func (r *DevEnvironmentReconciler) builderRequest(ctx context.Context, tenant client.Client, s *scope, img *v1alpha1.ImageSpec,
	spec build.Image, ref source.Ref, platform, name string) (build.JobRequest, error) {
	role := "build"
	if img.Run.KeepWarm {
		role = "warm-build"
	}
	req := build.JobRequest{
		Name: name, Namespace: s.env.Namespace, Owner: ownerRef(s.env),
		Labels: map[string]string{
			LabelEnvironment: s.env.Name, LabelImage: img.Name,
			LabelPlatform: strings.ReplaceAll(platform, "/", "-"), LabelRole: role,
		},
		HelperImage: r.Images.HelperImage, Source: ref, Image: spec, Platform: platform, Run: *img.Run,
		Registry: build.Registry{Prefix: s.env.Spec.Registry.Prefix, Insecure: s.env.Spec.Registry.Insecure,
			Compression: r.Images.Compression},
	}
	for _, src := range s.env.Spec.Sources {
		if src.Name == img.Source {
			req.SourceSecret = sourceSecretName(src)
		}
	}
	if s.env.Spec.Registry.CredentialsRef != nil {
		req.RegistrySecret = s.env.Spec.Registry.CredentialsRef.Name
	}
	if img.Run.Cache != nil {
		claim, err := ensureCacheClaim(ctx, tenant, s, img)
		if err != nil {
			return req, err
		}
		req.CacheClaim = claim
	}
	return req, nil
}

// builderJobFailed records a failed build in status and stalls the
// environment until the inputs change: the same inputs would fail again.
func (r *DevEnvironmentReconciler) builderJobFailed(ctx context.Context, s *scope, img *v1alpha1.ImageSpec, ist *v1alpha1.ImageStatus, job *batchv1.Job, o build.JobOutcome) error {
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
	if ist.Build.LogTail == "" && o.Pod != "" && o.FailedContainer != "" {
		ist.Build.LogTail = r.logTail(ctx, s.env.Namespace, o.Pod, o.FailedContainer)
	}
	msg := fmt.Sprintf("image %s: build failed in job %s: %s ended with %s", img.Name, job.Name, what, detail)
	if last := lastLine(ist.Build.LogTail); last != "" {
		msg += ": " + last
	}
	return &StallingError{Reason: v1alpha1.ReasonBuildFailed, Err: errors.New(msg + " (kubectl logs job/" + job.Name + " -c " + o.FailedContainer + ")")}
}

// logTail reads the end of a container's log, or says why it cannot.
func (r *DevEnvironmentReconciler) logTail(ctx context.Context, namespace, pod, container string) string {
	if r.Logs == nil {
		return ""
	}
	out, err := r.Logs.TailLog(ctx, namespace, pod, container, 40)
	if err != nil {
		return "(log not available: " + err.Error() + ")"
	}
	if len(out) > logTailBytes {
		out = out[len(out)-logTailBytes:]
	}
	return out
}

// ensureCacheClaim creates the image's build cache claim once; it outlives
// builds so the next build starts warm, and goes with the environment.
func ensureCacheClaim(ctx context.Context, tenant client.Client, s *scope, img *v1alpha1.ImageSpec) (string, error) {
	name := truncateName(s.env.Name+"-"+sanitize(img.Name)+"-cache", "")
	pvc := &corev1.PersistentVolumeClaim{}
	err := tenant.Get(ctx, types.NamespacedName{Namespace: s.env.Namespace, Name: name}, pvc)
	if err == nil || !apierrors.IsNotFound(err) {
		return name, tenantError(err, "get build cache claim "+name)
	}
	size := img.Run.Cache.Size
	pvc = &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.env.Namespace,
			Labels:          map[string]string{LabelEnvironment: s.env.Name, LabelImage: img.Name, LabelRole: "build-cache"},
			OwnerReferences: []metav1.OwnerReference{ownerRef(s.env)}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		},
	}
	if size != nil {
		pvc.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: *size}
	}
	if err := tenant.Create(ctx, pvc); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", tenantError(err, "create build cache claim "+name)
	}
	return name, nil
}

// builderJobName is "<env>-<image>-<arch>-<inputs>", at most 63
// characters (Job names become pod label values).
func builderJobName(env, image, platform, inputs string) string {
	return truncateName(env+"-"+sanitize(image)+"-"+archOf(platform), "-"+inputs[:10])
}

// archOf is a platform's name part: "arm64" for linux/arm64, "armv7" for
// linux/arm/v7.
func archOf(platform string) string {
	if parts := strings.Split(platform, "/"); len(parts) >= 2 {
		return strings.Join(parts[1:], "")
	}
	return platform
}

// truncateName shortens base so base+suffix fits 63 characters.
func truncateName(base, suffix string) string {
	if max := 63 - len(suffix); len(base) > max {
		base = strings.TrimRight(base[:max], "-.")
	}
	return base + suffix
}

// sanitize makes an image name ("tools/ginkgo") fit a resource name.
func sanitize(s string) string {
	return strings.NewReplacer("/", "-", ".", "-", "_", "-").Replace(s)
}

func ownerRef(env *v1alpha1.DevEnvironment) metav1.OwnerReference {
	t, f := true, false
	return metav1.OwnerReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: "DevEnvironment",
		Name: env.Name, UID: env.UID, Controller: &t, BlockOwnerDeletion: &f}
}

// sourceSecretName is the Secret a source's credentials come from.
func sourceSecretName(src v1alpha1.Source) string {
	switch {
	case src.Git != nil && src.Git.SecretRef != nil:
		return src.Git.SecretRef.Name
	case src.OCI != nil && src.OCI.SecretRef != nil:
		return src.OCI.SecretRef.Name
	}
	return ""
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return truncate(s, 300)
}

package build

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/image"
	"github.com/devloop-dev/devloop/internal/plan"
	"github.com/devloop-dev/devloop/internal/pods"
	"github.com/devloop-dev/devloop/internal/source"
)

// Paths and names inside a builder pod.
const (
	cacheDir               = "/var/run/devloop/cache"
	volumeAssembleTmp      = "assemble-tmp"
	registryCredentialsDir = "/var/run/devloop/registry-credentials"

	// ContainerBuild and ContainerAssemble are the builder pod's
	// containers, in the order they run, after pods.ContainerFetch.
	ContainerBuild    = "build"
	ContainerAssemble = "assemble"
)

// JobRequest is everything a builder Job for one image and one platform
// needs.
type JobRequest struct {
	Name, Namespace string
	Labels          map[string]string
	Owner           metav1.OwnerReference
	// HelperImage is the operator's own image.
	HelperImage string
	// Source is what the fetch container downloads into the workspace;
	// SourceSecret holds its credentials (optional).
	Source       source.Ref
	SourceSecret string
	// Image is assembled and pushed by the assemble container.
	Image    image.Spec
	Platform string
	Run      v1alpha1.BuildRun
	// Registry is where the image is pushed; RegistrySecret is a
	// kubernetes.io/dockerconfigjson Secret (optional).
	Registry       image.Registry
	RegistrySecret string
	// CacheClaim is a PersistentVolumeClaim mounted at the cache paths;
	// without one the paths are emptyDirs, so a non-root build can write
	// them.
	CacheClaim string
	// MaxTimeout caps Run.Timeout (DefaultMaxBuildTimeout when zero).
	MaxTimeout time.Duration
	// Outputs are the run step's outputs the push step packs and pushes
	// (only one platform's builder has them).
	Outputs []image.OutputSpec
	// TeamCache, when set, gives the go command the team build cache.
	TeamCache *PodTeamCache
	// GoPackages are the image's `go:` paths as package directories: a
	// warm build counts their dependencies first, the total of its
	// progress (progress.go).
	GoPackages []string
}

// AssembleReport is what the assemble container writes to its termination
// message: the platform image it pushed by digest, and the run step's
// outputs it pushed (at most four, so the report stays far below the
// kubelet's 4 KiB bound on a termination message).
type AssembleReport struct {
	Digest   string               `json:"digest"`
	Uploaded int                  `json:"uploaded"`
	Outputs  []image.OutputReport `json:"outputs,omitempty"`
}

// RegistryConfig is the registry as the assemble container receives it;
// credentials come from the mounted Secret, never from arguments.
type RegistryConfig struct {
	Prefix      string             `json:"prefix"`
	Insecure    bool               `json:"insecure,omitempty"`
	Compression source.Compression `json:"compression,omitempty"`
}

// BuilderJob returns the Job that fetches the source, runs the build
// command and assembles and pushes the image for one platform. It never
// retries: a failed build fails the same way for the same inputs, and the
// next source change makes a new Job.
func BuilderJob(req JobRequest) (*batchv1.Job, error) {
	imageJSON, registryJSON, err := helperSpecArgs(req)
	if err != nil {
		return nil, err
	}
	workspace := corev1.VolumeMount{Name: pods.VolumeWorkspace, MountPath: pods.WorkspaceDir}
	tmp := corev1.VolumeMount{Name: pods.VolumeTmp, MountPath: "/tmp"}
	fetch, volumes, err := pods.FetchContainer(req.HelperImage, req.Source, req.SourceSecret)
	if err != nil {
		return nil, err
	}
	volumes = append(pods.WorkspaceVolumes(), volumes...)

	cacheVol, cacheMounts, subPaths := cacheVolume(req)
	volumes = append(volumes, cacheVol)
	buildMounts := append([]corev1.VolumeMount{workspace, tmp}, cacheMounts...)
	// The kubelet would create missing subPath directories as root, which
	// the non-root build user could not write; the fetch container, as that
	// user, creates them first.
	fetch.VolumeMounts = append(fetch.VolumeMounts, corev1.VolumeMount{Name: "cache", MountPath: cacheDir})
	fetch.Args = append(fetch.Args, "--cache-root", cacheDir, "--cache-dirs", strings.Join(subPaths, ","))
	env := buildEnv(req)

	assembleArgs := []string{"helper", "assemble",
		"--image", string(imageJSON), "--platform", req.Platform,
		"--dir", pods.WorkspaceDir, "--registry", string(registryJSON)}
	outputs, err := outputsArgs(req)
	if err != nil {
		return nil, err
	}
	assembleArgs = append(assembleArgs, outputs...)
	assembleArgs = append(assembleArgs, "--registry-wait", registryWaitFor(capTimeout(&req.Run, req.MaxTimeout)).String())
	// The assemble container, which has the registry credentials, shares
	// only the (read-only) workspace with the build: its /tmp is its own.
	volumes = append(volumes, corev1.Volume{Name: volumeAssembleTmp, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	assembleMounts := []corev1.VolumeMount{{Name: pods.VolumeWorkspace, MountPath: pods.WorkspaceDir, ReadOnly: true}, {Name: volumeAssembleTmp, MountPath: "/tmp"}}
	if req.RegistrySecret != "" {
		volumes = append(volumes, pods.SecretVolume("registry-credentials", req.RegistrySecret))
		assembleMounts = append(assembleMounts, corev1.VolumeMount{Name: "registry-credentials", MountPath: registryCredentialsDir, ReadOnly: true})
		assembleArgs = append(assembleArgs, "--docker-config", registryCredentialsDir+"/"+corev1.DockerConfigJsonKey)
	}

	initContainers := []corev1.Container{fetch}
	if req.TeamCache != nil || len(req.GoPackages) > 0 {
		install, tools, toolsMount := installTools(req)
		initContainers = append(initContainers, install)
		volumes = append(volumes, tools)
		buildMounts = append(buildMounts, toolsMount)
	}
	command, err := countedCommand(req)
	if err != nil {
		return nil, err
	}
	initContainers = append(initContainers, corev1.Container{
		Name: ContainerBuild, Image: req.Run.Image, Command: command,
		WorkingDir: pods.WorkspaceDir, Env: env, VolumeMounts: buildMounts,
		EnvFrom:                  v1alpha1.ContainerEnvFrom(req.Run.EnvFrom),
		SecurityContext:          pods.RestrictedContainer(),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	})

	timeout := capTimeout(&req.Run, req.MaxTimeout)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: req.Name, Namespace: req.Namespace, Labels: req.Labels,
			OwnerReferences: []metav1.OwnerReference{req.Owner},
		},
		Spec: batchv1.JobSpec{
			BackoffLimit:          ptr.To[int32](0),
			PodFailurePolicy:      pods.RetryDisrupted(),
			ActiveDeadlineSeconds: ptr.To(int64(timeout.Seconds())),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: req.Labels},
				Spec: corev1.PodSpec{
					RestartPolicy:                corev1.RestartPolicyNever,
					AutomountServiceAccountToken: ptr.To(false),
					EnableServiceLinks:           ptr.To(false),
					// An evicted or superseded builder has nothing to
					// save (the next pod redoes its work, and what it
					// wrote to caches is written whole or not at all),
					// while its build, PID 1, ignores SIGTERM: the
					// default 30 s would only hold a drain and the next
					// pod back.
					TerminationGracePeriodSeconds: ptr.To[int64](builderGracePeriod),
					SecurityContext:               pods.RestrictedPod(),
					Volumes:                       volumes,
					InitContainers:                initContainers,
					Containers: []corev1.Container{
						pods.HelperContainer(ContainerAssemble, req.HelperImage, assembleArgs, assembleMounts),
					},
				},
			},
		},
	}
	spec := &job.Spec.Template.Spec
	withTeamCache(req, spec, &spec.InitContainers[len(spec.InitContainers)-1])
	return job, nil
}

// countedCommand is the build container's command: the run step's, or,
// for an image whose paths name its Go packages, the helper (from the
// tools volume) that counts their dependencies first and then runs it,
// so the progress has a total (progress.go), as a warm build's has.
func countedCommand(req JobRequest) ([]string, error) {
	if len(req.GoPackages) == 0 {
		return req.Run.Command, nil
	}
	pkgs, err := json.Marshal(req.GoPackages)
	if err != nil {
		return nil, err
	}
	return append([]string{pods.ToolsHelper, "helper", "count-packages", "--packages", string(pkgs), "--"}, req.Run.Command...), nil
}

// cacheVolume is the build cache (the claim, or an emptyDir without one)
// with one subPath mount per cache path, and the subPath names.
func cacheVolume(req JobRequest) (corev1.Volume, []corev1.VolumeMount, []string) {
	vol := corev1.Volume{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	if req.CacheClaim != "" {
		vol.VolumeSource = corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: req.CacheClaim}}
	}
	var mounts []corev1.VolumeMount
	var subPaths []string
	for i, p := range req.Run.Cache.PathsOrDefault() {
		// One volume serves every path through a subPath per path.
		sub := "p" + strconv.Itoa(i)
		subPaths = append(subPaths, sub)
		mounts = append(mounts, corev1.VolumeMount{Name: "cache", MountPath: p, SubPath: sub})
	}
	return vol, mounts, subPaths
}

// buildEnv is the build command's environment in a builder Job: the
// platform's, then the build's.
func buildEnv(req JobRequest) []corev1.EnvVar {
	return append(platformEnv(req), runEnv(req)...)
}

// platformEnv is what every build of one image and platform has: HOME and
// the target platform. A warm builder's container starts with it.
func platformEnv(req JobRequest) []corev1.EnvVar {
	goos, goarch, goarm := splitPlatform(req.Platform)
	env := []corev1.EnvVar{
		// A non-root user has no home in most builder images; this one
		// holds the mounted caches (Go's build cache is $HOME/.cache).
		{Name: "HOME", Value: v1alpha1.BuilderHome},
		{Name: "GOOS", Value: goos}, {Name: "GOARCH", Value: goarch},
		{Name: "TARGETPLATFORM", Value: req.Platform}, {Name: "TARGETOS", Value: goos}, {Name: "TARGETARCH", Value: goarch},
	}
	if goarm != "" {
		env = append(env, corev1.EnvVar{Name: "GOARM", Value: goarm})
	}
	return append(env, teamCacheEnv(req)...)
}

// runEnv is what changes from build to build: the source revision as tags
// render it (for version ldflags; the source has no .git), the go
// command's settings (goEnv), then the spec's entries, rendered
// (imageBuilds.renderRun). A warm builder gets it with each build
// (WarmBuildSteps), so a new revision does not replace the pod.
func runEnv(req JobRequest) []corev1.EnvVar {
	env := []corev1.EnvVar{
		{Name: "DEVLOOP_REVISION", Value: req.Source.ID},
		{Name: "DEVLOOP_SHORT_REVISION", Value: plan.ShortRevision(req.Source.ID)},
	}
	// With the run step's env: a warm builder's pod stays as it is when
	// an entry is added that replaces one of these.
	env = append(env, goEnv(req)...)
	for _, e := range req.Run.Env {
		// Later entries win in a container's env, so the spec overrides
		// the defaults above.
		env = append(env, corev1.EnvVar{Name: e.Name, Value: e.Value})
	}
	return env
}

// helperSpecArgs are the --image and --registry values of the helper's
// assemble and build steps; credentials are never among them.
func helperSpecArgs(req JobRequest) (image, registry []byte, err error) {
	if image, err = json.Marshal(req.Image); err != nil {
		return nil, nil, err
	}
	registry, err = json.Marshal(RegistryConfig{Prefix: req.Registry.Prefix, Insecure: req.Registry.Insecure, Compression: req.Registry.Compression})
	return image, registry, err
}

// splitPlatform turns "linux/arm/v7" into GOOS, GOARCH and GOARM.
func splitPlatform(p string) (goos, goarch, goarm string) {
	parts := strings.SplitN(p, "/", 3)
	goos, goarch = parts[0], "amd64"
	if len(parts) > 1 {
		goarch = parts[1]
	}
	if len(parts) > 2 && goarch == "arm" {
		goarm = strings.TrimPrefix(parts[2], "v")
	}
	return goos, goarch, goarm
}

// JobOutcome is what a builder Job's pod says about the build.
type JobOutcome struct {
	// Finished is true once the Job completed or failed.
	Finished bool
	// Succeeded builds report the pushed platform image.
	Succeeded bool
	Report    AssembleReport
	// Failed builds name the container that failed and its exit code;
	// Reason is the Job's or the container's reason (DeadlineExceeded,
	// OOMKilled, Error).
	FailedContainer string
	ExitCode        *int32
	Reason          string
	// Pod is the pod that ran, for reading logs.
	Pod string
}

// ReadJob interprets a builder Job and its pods.
func ReadJob(job *batchv1.Job, pods []corev1.Pod) (JobOutcome, error) {
	var out JobOutcome
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			out.Finished, out.Succeeded = true, true
		case batchv1.JobFailed:
			out.Finished, out.Reason = true, c.Reason
		}
	}
	if !out.Finished {
		return out, nil
	}
	for i := range pods {
		pod := &pods[i]
		out.Pod = pod.Name
		if out.Succeeded {
			for _, cs := range pod.Status.ContainerStatuses {
				if cs.Name == ContainerAssemble && cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0 {
					if err := json.Unmarshal([]byte(cs.State.Terminated.Message), &out.Report); err != nil {
						return out, fmt.Errorf("builder job %s: reading the assemble container's report %q: %w", job.Name, cs.State.Terminated.Message, err)
					}
					if out.Report.Digest == "" {
						return out, fmt.Errorf("builder job %s: the assemble container reported no digest", job.Name)
					}
					return out, nil
				}
			}
			continue
		}
		statuses := append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
		for _, cs := range statuses {
			if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
				out.FailedContainer, out.ExitCode = cs.Name, ptr.To(t.ExitCode)
				if t.Reason != "" && out.Reason == "" {
					out.Reason = t.Reason
				}
				return out, nil
			}
		}
	}
	if out.Succeeded {
		return out, fmt.Errorf("builder job %s completed but no pod reports a digest", job.Name)
	}
	return out, nil
}

// builderGracePeriod is how long a builder pod (a Job's or a warm one) is
// given to stop, in seconds.
const builderGracePeriod = 2

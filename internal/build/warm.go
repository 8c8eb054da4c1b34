package build

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/pods"
)

// A warm builder is a pod that stays up between builds of one image and
// platform (run.keepWarm): each build is three processes started in it
// through the pods/exec API. No pod is scheduled, no image pulled, no
// container started per change, and the compiler's caches stay on the
// mounted cache volume and in the page cache.
//
// Credentials never reach the container that runs the author's command:
// the pod has two containers sharing the workspace. ContainerWarmAgent, in
// the operator's image, is the only one with the source and registry
// Secrets mounted; it fetches the source into the workspace and assembles
// and pushes the image from it. ContainerWarm, in the builder image, runs
// the build command between the two, with no Secret, no ServiceAccount
// token and no view of the agent's processes or mounts.
const (
	// ContainerWarm is the warm builder's long-running container, in the
	// builder image: the author's build command runs in it.
	ContainerWarm = v1alpha1.ContainerWarmBuild
	// ContainerWarmAgent is the warm builder's container in the operator's
	// image: fetch and push run in it, with the credentials.
	ContainerWarmAgent = "fetch-push"
	// ContainerInstall copies the helper binary into the tools volume.
	ContainerInstall = pods.ContainerInstall

	// toolsDir holds the helper binary inside the builder image, which
	// knows nothing of devloop.
	toolsDir = pods.ToolsDir
	// WarmHelper is the helper binary's path in the warm container.
	WarmHelper = pods.ToolsHelper

	// AnnotationSpecHash on a warm builder is the hash of its pod spec: a
	// pod with another hash is replaced.
	AnnotationSpecHash = "devloop.dev/spec-hash"

	// volumeAgentTmp is the agent's own /tmp: what fetch and push leave
	// there is not shared with the build container.
	volumeAgentTmp = "agent-tmp"
	// volumeAgentState is where the agent keeps its own answers (a push
	// step's result), mounted in no other container: the build command
	// cannot plant one (issue 44).
	volumeAgentState = "agent-state"
	// WarmAgentState is where the agent mounts volumeAgentState.
	WarmAgentState = "/var/run/devloop/agent-state"

	// WarmBuildLog is the named pipe, in the build container's own /tmp,
	// that the run step writes the build command's output to and the
	// container's main process copies to its log: `kubectl devloop logs
	// ENV COMPONENT/IMAGE` reads a warm build there (pods/log), live.
	WarmBuildLog = "/tmp/.devloop-build-log"
)

// The steps of one warm build, in order, and where each runs.
const (
	WarmStepClaim = "claim" // build container: stop any other build, or adopt this one
	WarmStepFetch = "fetch" // agent: clear the workspace, fetch the source
	WarmStepRun   = "run"   // build container: the build command
	WarmStepPush  = "push"  // agent: assemble and push, print the report
)

// WarmPod returns the warm builder pod for req (its Source is not used:
// each build names its own). Its name is req.Name.
func WarmPod(req JobRequest) (*corev1.Pod, error) {
	tmp := corev1.VolumeMount{Name: pods.VolumeTmp, MountPath: "/tmp"}
	tools := corev1.VolumeMount{Name: "tools", MountPath: toolsDir}
	workspace := corev1.VolumeMount{Name: pods.VolumeWorkspace, MountPath: pods.WorkspaceDir}
	volumes := append(pods.WorkspaceVolumes(),
		corev1.Volume{Name: "tools", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		corev1.Volume{Name: volumeAgentTmp, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		corev1.Volume{Name: volumeAgentState, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	cacheVol, cacheMounts, subPaths := cacheVolume(req)
	volumes = append(volumes, cacheVol)

	install := pods.HelperContainer(ContainerInstall, req.HelperImage,
		[]string{"helper", "install", "--to", WarmHelper, "--cache-root", cacheDir, "--cache-dirs", strings.Join(subPaths, ",")},
		[]corev1.VolumeMount{tools, {Name: "cache", MountPath: cacheDir}})

	// The build container: the workspace, caches and tools; nothing secret.
	mounts := append([]corev1.VolumeMount{workspace, tmp, {Name: "tools", MountPath: toolsDir, ReadOnly: true}}, cacheMounts...)
	warm := corev1.Container{
		Name: ContainerWarm, Image: req.Run.Image,
		Command:    []string{WarmHelper, "helper", "idle", "--build-log", WarmBuildLog},
		WorkingDir: pods.WorkspaceDir, Env: platformEnv(req), VolumeMounts: mounts,
		// Each build's process inherits the container's environment, so
		// envFrom goes on the pod (a change replaces it, like any spec change).
		EnvFrom:         v1alpha1.ContainerEnvFrom(req.Run.EnvFrom),
		SecurityContext: pods.RestrictedContainer(),
	}

	// The agent: the workspace and the credentials.
	agentMounts := []corev1.VolumeMount{workspace, {Name: volumeAgentTmp, MountPath: "/tmp"}, {Name: volumeAgentState, MountPath: WarmAgentState}}
	if req.SourceSecret != "" {
		volumes = append(volumes, pods.SecretVolume("source-credentials", req.SourceSecret))
		agentMounts = append(agentMounts, corev1.VolumeMount{Name: "source-credentials", MountPath: pods.SourceCredentialsDir, ReadOnly: true})
	}
	if req.RegistrySecret != "" {
		volumes = append(volumes, pods.SecretVolume("registry-credentials", req.RegistrySecret))
		agentMounts = append(agentMounts, corev1.VolumeMount{Name: "registry-credentials", MountPath: registryCredentialsDir, ReadOnly: true})
	}
	agent := pods.HelperContainer(ContainerWarmAgent, req.HelperImage, []string{"helper", "idle"}, agentMounts)

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: req.Name, Namespace: req.Namespace, Labels: req.Labels,
			OwnerReferences: []metav1.OwnerReference{req.Owner},
		},
		Spec: corev1.PodSpec{
			// A warm builder that dies is replaced by the next build, not
			// restarted in place with a half-written workspace.
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			ShareProcessNamespace:         ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](builderGracePeriod),
			SecurityContext:               pods.RestrictedPod(),
			Volumes:                       volumes,
			InitContainers:                []corev1.Container{install},
			Containers:                    []corev1.Container{warm, agent},
		},
	}
	withTeamCache(req, &pod.Spec, &pod.Spec.Containers[0])
	spec, err := json.Marshal(pod.Spec)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(spec)
	pod.Annotations = map[string]string{AnnotationSpecHash: hex.EncodeToString(sum[:8])}
	return pod, nil
}

// WarmStep is one process of a warm build: the command exec'd into the
// named container of the warm builder.
type WarmStep struct {
	Name      string
	Container string
	Command   []string
}

// WarmBuildSteps are the processes exec'd, in order, into a warm builder
// for one build of req: fetch req.Source into the workspace (agent), run
// the build command (build container), assemble and push the image and
// print an AssembleReport as the last line of stdout (agent). token names
// this build: each step takes the workspace's lock, and the run and push
// steps refuse a workspace another build fetched into since.
func WarmBuildSteps(req JobRequest, token string) ([]WarmStep, error) {
	refJSON, err := json.Marshal(req.Source)
	if err != nil {
		return nil, err
	}
	imageJSON, registryJSON, err := helperSpecArgs(req)
	if err != nil {
		return nil, err
	}
	commandJSON, err := json.Marshal(req.Run.Command)
	if err != nil {
		return nil, err
	}
	envJSON, err := json.Marshal(runEnv(req))
	if err != nil {
		return nil, err
	}
	common := []string{"--token", token, "--dir", pods.WorkspaceDir}

	fetch := append([]string{pods.HelperBinary, "helper", "build", "--step", WarmStepFetch}, common...)
	fetch = append(fetch, "--ref", string(refJSON))
	if req.SourceSecret != "" {
		fetch = append(fetch, "--credentials", pods.SourceCredentialsDir)
	}
	run := append([]string{WarmHelper, "helper", "build", "--step", WarmStepRun}, common...)
	// The helper stops the command at the timeout itself: a process
	// exec'd into a container may outlive its closed stream.
	run = append(run, "--command", string(commandJSON), "--env", string(envJSON), "--timeout", capTimeout(&req.Run, req.MaxTimeout).String(),
		"--build-log", WarmBuildLog)
	if len(req.GoPackages) > 0 {
		pkgs, err := json.Marshal(req.GoPackages)
		if err != nil {
			return nil, err
		}
		run = append(run, "--count-packages", string(pkgs))
	}
	push := append([]string{pods.HelperBinary, "helper", "build", "--step", WarmStepPush}, common...)
	push = append(push, "--image", string(imageJSON), "--platform", req.Platform, "--registry", string(registryJSON), "--state", WarmAgentState)
	outputs, err := outputsArgs(req)
	if err != nil {
		return nil, err
	}
	push = append(push, outputs...)
	if req.RegistrySecret != "" {
		push = append(push, "--docker-config", registryCredentialsDir+"/"+corev1.DockerConfigJsonKey)
	}
	return []WarmStep{
		{Name: WarmStepFetch, Container: ContainerWarmAgent, Command: fetch},
		{Name: WarmStepRun, Container: ContainerWarm, Command: run},
		{Name: WarmStepPush, Container: ContainerWarmAgent, Command: push},
	}, nil
}

// ExitUnavailable is a devloop helper step's exit code (in a builder Job's
// fetch or assemble container, or a warm build's fetch or push) when what
// it needed was unavailable (a registry down): the operator waits and
// tries again rather than failing the build (as sysexits' EX_TEMPFAIL).
const ExitUnavailable = 75

// ExitNoSuchHost is ExitUnavailable for a registry host that does not
// resolve (image.NoSuchHostError): waited for at first, then a mistake in
// the spec.
const ExitNoSuchHost = 76

// WarmExitTimedOut is the run step's exit code when the helper stopped
// the build command at its timeout (as timeout(1) exits).
const WarmExitTimedOut = 124

// WarmClaim is what the claim step prints: the build the warm builder goes
// on with (this one, or one of the same inputs an earlier operator
// process started, adopted) and when it started.
type WarmClaim struct {
	Token   string    `json:"token"`
	Started time.Time `json:"started"`
}

// WarmClaimStep is the first process of a warm build, exec'd into the
// build container (whose processes are the builds'): it adopts the build
// of key already claimed and not failed, or kills whatever other build
// still runs (its whole process group) and claims the workspace for token.
// key names the build's inputs; the rest of the steps go on with the
// token it prints (WarmClaim).
func WarmClaimStep(key, token string) WarmStep {
	return WarmStep{Name: WarmStepClaim, Container: ContainerWarm, Command: []string{
		WarmHelper, "helper", "build", "--step", WarmStepClaim, "--key", key, "--token", token, "--dir", pods.WorkspaceDir,
	}}
}

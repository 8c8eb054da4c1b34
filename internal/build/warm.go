package build

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"github.com/devloop-dev/devloop/internal/pods"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// A warm builder is a pod that stays up between builds of one image and
// platform (run.keepWarm): each build is a `manager helper build` process
// started in it through the pods/exec API. No pod is scheduled, no image
// pulled, no container started per change, and the compiler's caches stay
// on the mounted cache volume and in the page cache.
const (
	// ContainerWarm is the warm builder's long-running container, in the
	// builder image; builds are exec'd into it.
	ContainerWarm = "build"
	// ContainerInstall copies the helper binary into the tools volume.
	ContainerInstall = "install"

	// toolsDir holds the helper binary inside the builder image, which
	// knows nothing of devloop.
	toolsDir = "/var/run/devloop/tools"
	// WarmHelper is the helper binary's path in the warm container.
	WarmHelper = toolsDir + "/devloop"

	// AnnotationSpecHash on a warm builder is the hash of its pod spec: a
	// pod with another hash is replaced.
	AnnotationSpecHash = "devloop.dev/spec-hash"
)

// WarmPod returns the warm builder pod for req (its Source is not used:
// each build names its own). Its name is req.Name.
func WarmPod(req JobRequest) (*corev1.Pod, error) {
	tmp := corev1.VolumeMount{Name: pods.VolumeTmp, MountPath: "/tmp"}
	tools := corev1.VolumeMount{Name: "tools", MountPath: toolsDir}
	volumes := append(pods.WorkspaceVolumes(), corev1.Volume{Name: "tools", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	cacheVol, cacheMounts, subPaths := cacheVolume(req)
	volumes = append(volumes, cacheVol)

	install := pods.HelperContainer(ContainerInstall, req.HelperImage,
		[]string{"helper", "install", "--to", WarmHelper, "--cache-root", cacheDir, "--cache-dirs", strings.Join(subPaths, ",")},
		[]corev1.VolumeMount{tools, {Name: "cache", MountPath: cacheDir}})

	mounts := append([]corev1.VolumeMount{{Name: pods.VolumeWorkspace, MountPath: pods.WorkspaceDir}, tmp, {Name: "tools", MountPath: toolsDir, ReadOnly: true}}, cacheMounts...)
	if req.SourceSecret != "" {
		volumes = append(volumes, pods.SecretVolume("source-credentials", req.SourceSecret))
		mounts = append(mounts, corev1.VolumeMount{Name: "source-credentials", MountPath: pods.SourceCredentialsDir, ReadOnly: true})
	}
	if req.RegistrySecret != "" {
		volumes = append(volumes, pods.SecretVolume("registry-credentials", req.RegistrySecret))
		mounts = append(mounts, corev1.VolumeMount{Name: "registry-credentials", MountPath: registryCredentialsDir, ReadOnly: true})
	}
	warm := corev1.Container{
		Name: ContainerWarm, Image: req.Run.Image,
		Command:    []string{WarmHelper, "helper", "idle"},
		WorkingDir: pods.WorkspaceDir, Env: buildEnv(req), VolumeMounts: mounts,
		SecurityContext: pods.RestrictedContainer(),
	}
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
			TerminationGracePeriodSeconds: ptr.To[int64](2),
			SecurityContext:               pods.RestrictedPod(),
			Volumes:                       volumes,
			InitContainers:                []corev1.Container{install},
			Containers:                    []corev1.Container{warm},
		},
	}
	spec, err := json.Marshal(pod.Spec)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(spec)
	pod.Annotations = map[string]string{AnnotationSpecHash: hex.EncodeToString(sum[:8])}
	return pod, nil
}

// WarmBuildCommand is the command exec'd into a warm builder for one
// build of req: fetch req.Source into the workspace, run the build command,
// assemble and push the image, and print an AssembleReport as the last
// line of stdout (the build's own output goes to stderr).
func WarmBuildCommand(req JobRequest) ([]string, error) {
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
	cmd := []string{WarmHelper, "helper", "build",
		"--ref", string(refJSON), "--image", string(imageJSON), "--platform", req.Platform,
		"--registry", string(registryJSON), "--command", string(commandJSON), "--dir", pods.WorkspaceDir}
	if req.SourceSecret != "" {
		cmd = append(cmd, "--credentials", pods.SourceCredentialsDir)
	}
	if req.RegistrySecret != "" {
		cmd = append(cmd, "--docker-config", registryCredentialsDir+"/"+corev1.DockerConfigJsonKey)
	}
	return cmd, nil
}

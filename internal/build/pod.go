package build

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/devloop-dev/devloop/internal/source"
)

// Volumes every devloop pod that works on a source has: the fetched
// source, and a writable /tmp (the root filesystem may be read-only).
const (
	VolumeWorkspace = "workspace"
	VolumeTmp       = "tmp"
)

// WorkspaceVolumes are the emptyDirs behind VolumeWorkspace and VolumeTmp.
func WorkspaceVolumes() []corev1.Volume {
	return []corev1.Volume{
		{Name: VolumeWorkspace, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: VolumeTmp, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
}

// FetchContainer is the init container that downloads a resolved source
// into the workspace with the operator's own fetch code (`manager helper
// fetch`), so a pod sees exactly the content the operator resolved: the
// same commit or digest, verified the same way. secret, when not empty, is
// the source's credentials Secret; the returned volumes (none without a
// secret) must be added to the pod next to WorkspaceVolumes.
func FetchContainer(helperImage string, ref source.Ref, secret string) (corev1.Container, []corev1.Volume, error) {
	refJSON, err := json.Marshal(ref)
	if err != nil {
		return corev1.Container{}, nil, err
	}
	args := []string{"helper", "fetch", "--ref", string(refJSON), "--dest", WorkspaceDir}
	mounts := []corev1.VolumeMount{{Name: VolumeWorkspace, MountPath: WorkspaceDir}, {Name: VolumeTmp, MountPath: "/tmp"}}
	var volumes []corev1.Volume
	if secret != "" {
		volumes = append(volumes, secretVolume("source-credentials", secret))
		mounts = append(mounts, corev1.VolumeMount{Name: "source-credentials", MountPath: sourceCredentialsDir, ReadOnly: true})
		args = append(args, "--credentials", sourceCredentialsDir)
	}
	return helperContainer(ContainerFetch, helperImage, args, mounts), volumes, nil
}

// RestrictedPod and RestrictedContainer satisfy the restricted Pod
// Security profile, running as a fixed non-root user: images that default
// to root (most builder and test images) still start, and volumes keep
// stable owners.
func RestrictedPod() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To[int64](builderUID),
		RunAsGroup:     ptr.To[int64](builderUID),
		FSGroup:        ptr.To[int64](builderUID),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// RestrictedContainer is the container half of RestrictedPod.
func RestrictedContainer() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

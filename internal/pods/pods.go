// Package pods holds what every pod devloop runs for an environment
// shares, builder pods and test pods alike: the workspace a source is
// fetched into and the fetch step itself (FetchStep, in the pod), the
// helper containers that run the operator's own binary, the restricted
// security context, cache claims, the names of what devloop creates, and
// reading a container's log tail.
package pods

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/devloop-dev/devloop/internal/source"
)

// Paths and names inside devloop's pods.
const (
	// WorkspaceDir holds the fetched source.
	WorkspaceDir = "/workspace"
	// HelperBinary is the operator binary in its own image; the helper
	// containers run its `helper` subcommand.
	HelperBinary = "/manager"
	// SourceCredentialsDir is where a source's credentials Secret is
	// mounted for the fetch.
	SourceCredentialsDir = "/var/run/devloop/source-credentials"
	// ContainerFetch is the init container that fills the workspace.
	ContainerFetch = "fetch"
	// VolumeWorkspace and VolumeTmp are the fetched source and a writable
	// /tmp (the root filesystem may be read-only).
	VolumeWorkspace = "workspace"
	VolumeTmp       = "tmp"
	// VolumeFetchTmp is the fetch container's own /tmp: what the fetch
	// with the credentials leaves there is not shared.
	VolumeFetchTmp = "fetch-tmp"
	// TerminationLog is where the kubelet reads a container's termination
	// message: the helper steps that report to the operator (a builder's
	// assemble, a test pod's report) write there.
	TerminationLog = "/dev/termination-log"
	// UID runs every container: the restricted Pod Security profile
	// refuses root, and a fixed UID keeps cache volumes' owners stable.
	UID = 65532
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
// the source's credentials Secret. The container shares only the workspace
// with the pod's others: its /tmp is its own (VolumeFetchTmp), like the
// credentials. The returned volumes must be added to the pod next to
// WorkspaceVolumes.
func FetchContainer(helperImage string, ref source.Ref, secret string) (corev1.Container, []corev1.Volume, error) {
	refJSON, err := json.Marshal(ref)
	if err != nil {
		return corev1.Container{}, nil, err
	}
	args := []string{"helper", "fetch", "--ref", string(refJSON), "--dest", WorkspaceDir}
	mounts := []corev1.VolumeMount{{Name: VolumeWorkspace, MountPath: WorkspaceDir}, {Name: VolumeFetchTmp, MountPath: "/tmp"}}
	volumes := []corev1.Volume{{Name: VolumeFetchTmp, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	if secret != "" {
		volumes = append(volumes, SecretVolume("source-credentials", secret))
		mounts = append(mounts, corev1.VolumeMount{Name: "source-credentials", MountPath: SourceCredentialsDir, ReadOnly: true})
		args = append(args, "--credentials", SourceCredentialsDir)
	}
	return HelperContainer(ContainerFetch, helperImage, args, mounts), volumes, nil
}

// HelperContainer runs the operator's own binary (`manager helper ...`).
func HelperContainer(name, image string, args []string, mounts []corev1.VolumeMount) corev1.Container {
	return corev1.Container{
		Name: name, Image: image, Command: []string{HelperBinary}, Args: args,
		VolumeMounts: mounts, SecurityContext: RestrictedContainer(),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		Env:                      []corev1.EnvVar{{Name: "HOME", Value: "/tmp"}},
	}
}

// SecretVolume mounts a Secret readable by its owner only.
func SecretVolume(name, secret string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: secret, DefaultMode: ptr.To[int32](0o400)}}}
}

// RestrictedPod and RestrictedContainer satisfy the restricted Pod
// Security profile, running as a fixed non-root user: images that default
// to root (most builder and test images) still start, and volumes keep
// stable owners.
func RestrictedPod() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To[int64](UID),
		RunAsGroup:     ptr.To[int64](UID),
		FSGroup:        ptr.To[int64](UID),
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

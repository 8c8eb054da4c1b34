package testrun

import (
	"fmt"
	"path"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/pods"
)

// ContainerReport is the report step of a suite with a report: a native
// sidecar (an init container that restarts Always) running `manager
// helper test-report`. It idles while the suite runs; when the test
// container has exited, whatever its exit code, the kubelet stops the
// sidecar, which then reads the suite's report from the shared workspace
// and writes a summary of at most 4 KiB as its termination message,
// which the operator reads from the pod's status (as it reads builder
// pods' assemble reports). The user's command and image stay as they are,
// and the operator needs no exec or file access to the pod.
const ContainerReport = "report"

// reportContainer is the report step of suite s.
func reportContainer(s *v1alpha1.TestSuite, helperImage string) (corev1.Container, error) {
	if helperImage == "" {
		return corev1.Container{}, fmt.Errorf("suite %s has a report (spec.tests[].report), but this operator has no helper image to read it (--helper-image)", s.Name)
	}
	file := path.Join(pods.WorkspaceDir, s.Report.Path)
	c := pods.HelperContainer(ContainerReport, helperImage,
		[]string{"helper", "test-report", "--path", file, "--format", string(s.Report.Format)},
		[]corev1.VolumeMount{{Name: pods.VolumeWorkspace, MountPath: pods.WorkspaceDir, ReadOnly: true}})
	c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
	return c, nil
}

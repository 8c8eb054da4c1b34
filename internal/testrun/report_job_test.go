package testrun

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/pods"
	"github.com/devloop-dev/devloop/internal/source"
)

func TestJobWithReportHasTheReportSidecar(t *testing.T) {
	g := NewWithT(t)
	suite := &v1alpha1.TestSuite{Name: "unit", Command: []string{"go", "test", "-json", "./..."},
		Report: &v1alpha1.TestReport{Path: "out/report.json", Format: v1alpha1.ReportGoTestJSON}}
	ref := &source.Ref{Source: "app", Kind: source.KindOCI, URL: "r.test/src", Digest: "sha256:abc"}
	job, err := Job(JobRequest{Name: "e-unit-1", Suite: suite, Image: "golang:1.25", Source: ref, HelperImage: "devloop:1"})
	g.Expect(err).NotTo(HaveOccurred())
	spec := job.Spec.Template.Spec
	// After the fetch, so the workspace is filled before the test starts.
	g.Expect(spec.InitContainers).To(HaveLen(2))
	g.Expect(spec.InitContainers[0].Name).To(Equal(ContainerFetch))
	c := spec.InitContainers[1]
	g.Expect(c.Name).To(Equal(ContainerReport))
	g.Expect(c.Image).To(Equal("devloop:1"))
	g.Expect(c.RestartPolicy).To(HaveValue(Equal(corev1.ContainerRestartPolicyAlways)), "a native sidecar, stopped once the test container exits")
	g.Expect(c.Args).To(Equal([]string{"helper", "test-report", "--path", "/workspace/out/report.json", "--format", "GoTestJSON"}))
	g.Expect(c.VolumeMounts).To(ConsistOf(corev1.VolumeMount{Name: pods.VolumeWorkspace, MountPath: pods.WorkspaceDir, ReadOnly: true}))
	g.Expect(c.SecurityContext).To(Equal(pods.RestrictedContainer()))
	// The user's command is not wrapped.
	g.Expect(spec.Containers[0].Command).To(Equal(suite.Command))

	_, err = Job(JobRequest{Name: "e-unit-1", Suite: suite, Image: "golang:1.25"})
	g.Expect(err).To(MatchError(ContainSubstring("spec.tests[].report")))
}

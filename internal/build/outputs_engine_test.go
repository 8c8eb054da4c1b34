package build

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/devloop-dev/devloop/internal/image"
)

// TestOnlyThePushingContainerPacksOutputs: the outputs go to the builder
// Job's assemble container and the warm builder's push step, both in the
// container with the registry credentials, never to the build command's.
func TestOnlyThePushingContainerPacksOutputs(t *testing.T) {
	g := NewWithT(t)
	req := warmRequest()
	req.Outputs = []image.OutputSpec{{Name: "crds", Path: "config/crd/bases", Field: "spec.components[1].images[0].run.outputs[0]"}}
	steps, err := WarmBuildSteps(req, "t0k3n")
	g.Expect(err).NotTo(HaveOccurred())
	for _, s := range steps {
		has := slices.Contains(s.Command, "--outputs")
		g.Expect(has).To(Equal(s.Name == WarmStepPush), s.Name)
		if has {
			g.Expect(s.Container).To(Equal(ContainerWarmAgent))
			var got []image.OutputSpec
			g.Expect(json.Unmarshal([]byte(s.Command[slices.Index(s.Command, "--outputs")+1]), &got)).To(Succeed())
			g.Expect(got).To(Equal(req.Outputs))
		}
	}

	req.Run.KeepWarm = false
	job, err := BuilderJob(req)
	g.Expect(err).NotTo(HaveOccurred())
	spec := job.Spec.Template.Spec
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		args := strings.Join(append(slices.Clone(c.Command), c.Args...), " ")
		g.Expect(strings.Contains(args, "--outputs")).To(Equal(c.Name == ContainerAssemble), c.Name)
	}

	// The report comes back in the assemble container's termination
	// message, read as before.
	report, err := json.Marshal(AssembleReport{Digest: "sha256:1", Outputs: []image.OutputReport{{Name: "crds", Digest: "sha256:2"}}})
	g.Expect(err).NotTo(HaveOccurred())
	job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	pod := corev1.Pod{}
	pod.Name = "p"
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: ContainerAssemble, State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{Message: string(report)}}}}
	out, err := ReadJob(job, []corev1.Pod{pod})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.Report.Outputs).To(Equal([]image.OutputReport{{Name: "crds", Digest: "sha256:2"}}))
}

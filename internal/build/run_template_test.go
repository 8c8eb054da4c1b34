package build

import (
	"encoding/json"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/internal/plan"
	"github.com/devloop-dev/devloop/internal/source"
	"github.com/devloop-dev/devloop/test/builder"
)

// operatorEnv builds an operator image and a bundle whose run step reads
// its digest; nodes pull from another address than the operator pushes to.
func operatorEnv() *v1alpha1.DevEnvironment {
	env := builder.Env("team", "operator").In("localhost:5000").Registry().PullPrefix("kind-registry:5000/team").Components(
		builder.Component("operator", builder.Images(builder.Image("org/operator"))),
		builder.Component("bundle", builder.Images(builder.Image("bundle", builder.Run(&v1alpha1.BuildRun{
			Image:   "golang:1.25",
			Command: []string{"make", "{{ .ImageBase }}", "VERSION={{ .ShortRevision }}"},
			Env: []v1alpha1.EnvVar{
				{Name: "IMG", Value: `{{ (image "org/operator").Reference }}`},
				{Name: "OPERATOR_TAG", Value: `{{ (image "org/operator").Tag }}`},
			},
		}))))).Obj()
	env.Status.Components = []v1alpha1.ComponentStatus{{Name: "operator", Images: []v1alpha1.ImageStatus{{
		Name: "org/operator", Repository: "localhost:5000/team/org/operator", Digest: "sha256:0a", ContentHash: "c0ffee",
	}}}}
	return env
}

func TestRenderRunForABuild(t *testing.T) {
	g := NewWithT(t)
	env := operatorEnv()
	s := &imageBuilds{env: env}
	img := &env.Spec.Components[1].Images[0]
	tags := plan.NewTagTemplates(nil, "bundle", img.Name, img.Source, "0123456789abcdef")

	rendered, reads, err := s.renderRun(img, tags)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rendered.Run.Command).To(Equal([]string{"make", "bundle", "VERSION=0123456789ab"}))
	g.Expect(rendered.Run.Env).To(Equal([]v1alpha1.EnvVar{
		{Name: "IMG", Value: "kind-registry:5000/team/org/operator@sha256:0a"},
		{Name: "OPERATOR_TAG", Value: "c0ffee"},
	}), "the reference nodes pull, under registry.pullPrefix")
	g.Expect(reads).To(Equal(map[string]string{"org/operator": "sha256:0a"}), "the digest read is part of the inputs")
	g.Expect(img.Run.Env[0].Value).To(Equal(`{{ (image "org/operator").Reference }}`), "the spec is not changed")

	// Without templates, the image is the spec's and reads nothing, so the
	// inputs of an image without templates stay what they were.
	plain := &env.Spec.Components[0].Images[0]
	same, reads, err := s.renderRun(plain, tags)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(same).To(BeIdenticalTo(plain))
	g.Expect(reads).To(BeNil())

	// An image not pushed yet (status catching up) is retried, not Stalled.
	env.Status.Components[0].Images[0].Digest = ""
	_, _, err = s.renderRun(img, tags)
	g.Expect(err).To(MatchError(ContainSubstring("reads image org/operator, which has no pushed digest yet")))
	g.Expect(fault.AsStalled(err)).To(BeNil())
}

// TestRunEnvCarriesTheRevision: a builder Job's command sees the revision
// tags render (the source has no .git), before the spec's env, which wins;
// a warm builder gets the same env with each build, not in its pod.
func TestRunEnvCarriesTheRevision(t *testing.T) {
	g := NewWithT(t)
	req := warmRequest()
	req.Source = source.Ref{Source: "app", Kind: source.KindGit, ID: "0123456789abcdef0123", Commit: "0123456789abcdef0123"}
	req.Run.Env = []v1alpha1.EnvVar{{Name: "DEVLOOP_SHORT_REVISION", Value: "mine"}, {Name: "VERSION", Value: "v1"}}
	// The revision, the go command's settings (goEnv), then the spec's.
	want := []corev1.EnvVar{
		{Name: "DEVLOOP_REVISION", Value: "0123456789abcdef0123"},
		{Name: "DEVLOOP_SHORT_REVISION", Value: "0123456789ab"},
		{Name: "GOCACHE", Value: v1alpha1.BuilderHome + "/.cache/go-build"},
		{Name: "GOMODCACHE", Value: "/go/pkg/mod"},
		{Name: "GOFLAGS", Value: "-v"},
		{Name: "DEVLOOP_SHORT_REVISION", Value: "mine"},
		{Name: "VERSION", Value: "v1"},
	}

	job, err := BuilderJob(req)
	g.Expect(err).NotTo(HaveOccurred())
	env := job.Spec.Template.Spec.InitContainers[1].Env
	g.Expect(env[len(env)-len(want):]).To(Equal(want), "the spec's entries come last, so they win")
	g.Expect(env).To(ContainElement(corev1.EnvVar{Name: "GOARCH", Value: "arm64"}))

	pod, err := WarmPod(req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pod.Spec.Containers[0].Env).NotTo(ContainElement(HaveField("Name", "DEVLOOP_REVISION")), "a new revision keeps the warm pod")
	g.Expect(pod.Spec.Containers[0].Env).To(ContainElement(corev1.EnvVar{Name: "GOARCH", Value: "arm64"}))
	steps, err := WarmBuildSteps(req, "t0k3n")
	g.Expect(err).NotTo(HaveOccurred())
	run := steps[1].Command
	i := slices.Index(run, "--env")
	g.Expect(i).To(BeNumerically(">", 0))
	var got []corev1.EnvVar
	g.Expect(json.Unmarshal([]byte(run[i+1]), &got)).To(Succeed())
	g.Expect(got).To(Equal(want))
}

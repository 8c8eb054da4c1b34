package operatortest

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/builder"
)

// APIEnv is the environment the builder Job tests start from: one image
// "api", compiled by a run step (go build, with a cache) for two
// platforms from AppSource, in component "api", which applies the whole
// source as manifests.
func APIEnv(ns string) *v1alpha1.DevEnvironment {
	size := resource.MustParse("1Gi")
	api := builder.Component("api", builder.Manifests())
	api.Images = []v1alpha1.ImageSpec{{
		Name: "api", Source: builder.AppSource,
		Run: &v1alpha1.BuildRun{
			Image:   "golang:1.25",
			Command: []string{"go", "build", "-o", "out/api", "./cmd/api"},
			Env:     []v1alpha1.EnvVar{{Name: "CGO_ENABLED", Value: "0"}},
			Cache:   &v1alpha1.BuildCache{Size: &size},
		},
		Layers:     []v1alpha1.LayerMapping{{From: "out/api", To: "/api", Mode: "0755"}},
		Entrypoint: []string{"/api"},
		Platforms:  []string{"linux/amd64", "linux/arm64"},
		Tags:       []string{"{{ .Revision }}"},
	}}
	return Env(ns, "api").Registry().AppSource().Components(api).Obj()
}

// BuilderJobs are the builder Jobs in ns not being deleted, by platform.
func BuilderJobs(g Gomega, ns string) map[string]batchv1.Job {
	jobs := &batchv1.JobList{}
	g.Expect(Admin.List(context.Background(), jobs, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelRole: v1alpha1.RoleBuild})).To(Succeed())
	out := map[string]batchv1.Job{}
	for _, j := range jobs.Items {
		if j.DeletionTimestamp == nil {
			out[j.Labels[v1alpha1.LabelPlatform]] = j
		}
	}
	return out
}

// WaitForBuilderJob waits for the builder Job of ns for the platform (by
// its label value, "linux-amd64") and returns it.
func WaitForBuilderJob(t testing.TB, ns, platform string) batchv1.Job {
	t.Helper()
	var job batchv1.Job
	NewWithT(t).Eventually(func(g Gomega) {
		jobs := BuilderJobs(g, ns)
		g.Expect(jobs).To(HaveKey(platform))
		job = jobs[platform]
	}, Timeout).Should(Succeed())
	return job
}

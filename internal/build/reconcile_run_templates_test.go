package build_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// volcanoTree is a Go tree with three binaries built by one Makefile, as
// Volcano's is.
func volcanoTree(marker string) map[string]string {
	return map[string]string{
		"Makefile":                           "vc-scheduler vc-controller-manager vc-webhook-manager:\n\tgo build -o _output/bin/$@ ./cmd/$(@:vc-%=%)\n",
		"cmd/scheduler/main.go":              "package main // " + marker + "\nfunc main() {}\n",
		"cmd/controller-manager/main.go":     "package main\nfunc main() {}\n",
		"cmd/webhook-manager/main.go":        "package main\nfunc main() {}\n",
		"pkg/scheduler/framework/session.go": "package framework\n",
	}
}

// buildJobsByImage lists the namespace's builder Jobs not being deleted,
// by the image they build.
func buildJobsByImage(g Gomega, ns string, images ...string) map[string]batchv1.Job {
	jobs := &batchv1.JobList{}
	g.Expect(operatortest.Admin.List(context.Background(), jobs, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelRole: v1alpha1.RoleBuild})).To(Succeed())
	out := map[string]batchv1.Job{}
	for _, j := range jobs.Items {
		for _, img := range images {
			if j.DeletionTimestamp == nil && j.Labels[v1alpha1.LabelImage] == v1alpha1.LabelValue(img) {
				out[img] = j
			}
		}
	}
	return out
}

// buildContainer is the container of a builder Job running the run step.
func buildContainer(job batchv1.Job) corev1.Container {
	for _, c := range job.Spec.Template.Spec.InitContainers {
		if c.Name == build.ContainerBuild {
			return c
		}
	}
	return corev1.Container{}
}

// finishBuild does what a builder Job's assemble container does (push a
// platform image of its own, report its digest) and ends the Job.
func finishBuild(t *testing.T, ns, image string, job batchv1.Job) string {
	t.Helper()
	d := pushRandom(NewWithT(t), ns+"/"+image)
	finishBuildJob(t, job, d, 1)
	return d.String()
}

// TestOneRunSpecBuildsThreeImages: Volcano's three images come from one
// run spec, parameterized by {{ .ImageBase }}: each builder Job runs its
// own make target, and every build sees the source revision.
func TestOneRunSpecBuildsThreeImages(t *testing.T) {
	g := NewWithT(t)
	ns := operatortest.Namespace(t)
	srcDigest := operatortest.AppFiles(t, ns, volcanoTree(ns))
	images := []string{"volcanosh/vc-scheduler", "volcanosh/vc-controller-manager", "volcanosh/vc-webhook-manager"}
	// One run spec, as a YAML anchor would share it.
	run := v1alpha1.BuildRun{
		Image:   "golang:1.25",
		Command: []string{"make", "{{ .ImageBase }}"},
		Env:     []v1alpha1.EnvVar{{Name: "RELEASE_VER", Value: "dev-{{ .ShortRevision }}"}},
	}
	volcano := v1alpha1.Component{Name: "volcano"}
	for _, img := range images {
		base := img[len("volcanosh/"):]
		volcano.Images = append(volcano.Images, v1alpha1.ImageSpec{
			Name: img, Source: "volcano", Run: run.DeepCopy(),
			Layers:     []v1alpha1.LayerMapping{{From: "_output/bin/" + base, To: "/" + base, Mode: "0755"}},
			Entrypoint: []string{"/" + base},
		})
	}
	env := operatortest.Env(ns, "volcano").Registry().PushedSource("volcano", "src").Components(volcano).Create(t, operatortest.Admin)
	key := client.ObjectKeyFromObject(env)

	var jobs map[string]batchv1.Job
	g.Eventually(func(g Gomega) {
		jobs = buildJobsByImage(g, ns, images...)
		g.Expect(jobs).To(HaveLen(3))
	}, operatortest.Timeout).Should(Succeed())
	for _, img := range images {
		c := buildContainer(jobs[img])
		g.Expect(c.Command).To(Equal([]string{"make", img[len("volcanosh/"):]}), img)
		g.Expect(c.Env).To(ContainElements(
			corev1.EnvVar{Name: "DEVLOOP_REVISION", Value: srcDigest.Hex},
			corev1.EnvVar{Name: "DEVLOOP_SHORT_REVISION", Value: srcDigest.Hex[:12]},
			corev1.EnvVar{Name: "RELEASE_VER", Value: "dev-" + srcDigest.Hex[:12]}), img)
	}
	for _, img := range images {
		finishBuild(t, ns, img, jobs[img])
	}
	env = operatortest.WaitForEnv(t, key, operatortest.ExpectReadyAndCurrent)
	for _, img := range images {
		g.Expect(env.Status.Component("volcano").Image(img).Digest).NotTo(BeEmpty(), img)
	}
	g.Expect(env.Spec.Components[0].Images[0].Run.Command[1]).To(Equal("{{ .ImageBase }}"), "the spec keeps its templates")
}

// TestBundleBuildReadsTheOperatorImage: a bundle build whose env reads the
// operator image's reference depends on the operator component without
// saying so: its builder Job starts only once the operator is Ready, with
// the operator's repository@digest as nodes pull it. The same operator
// digest builds nothing again; a new one rebuilds the bundle.
func TestBundleBuildReadsTheOperatorImage(t *testing.T) {
	g := NewWithT(t)
	ns := operatortest.Namespace(t)
	files := map[string]string{
		"cmd/operator/main.go":               "package main // " + ns + "\nfunc main() {}\n",
		"bundle/manifests/operator.csv.yaml": "image: IMG\n",
	}
	operatortest.AppFiles(t, ns, files)
	pull := "kind-registry:5000/" + ns
	env := operatortest.Env(ns, "gpu-operator").Registry().PullPrefix(pull).AppSource().Components(
		// Declared first: only the template orders it after the
		// operator.
		v1alpha1.Component{Name: "bundle", Images: []v1alpha1.ImageSpec{{
			Name: "bundle", Source: "app", Paths: []string{"bundle"},
			Run: &v1alpha1.BuildRun{Image: "golang:1.25", Command: []string{"make", "bundle"},
				Env: []v1alpha1.EnvVar{{Name: "IMG", Value: `{{ (image "operator").Reference }}`}}},
			Layers: []v1alpha1.LayerMapping{{From: "bundle/manifests", To: "/manifests"}},
		}}},
		v1alpha1.Component{Name: "operator", Images: []v1alpha1.ImageSpec{{
			Name: "operator", Source: "app", Paths: []string{"cmd"},
			Run:    &v1alpha1.BuildRun{Image: "golang:1.25", Command: []string{"go", "build", "-o", "out/operator", "./cmd/operator"}},
			Layers: []v1alpha1.LayerMapping{{From: "out/operator", To: "/operator", Mode: "0755"}},
		}}},
	).Create(t, operatortest.Admin)
	key := client.ObjectKeyFromObject(env)

	// The operator builds; the bundle waits for it, and says so.
	var jobs map[string]batchv1.Job
	g.Eventually(func(g Gomega) {
		jobs = buildJobsByImage(g, ns, "operator", "bundle")
		g.Expect(jobs).To(HaveKey("operator"))
	}, operatortest.Timeout).Should(Succeed())
	operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		st := env.Status.Component("bundle")
		g.Expect(st).NotTo(BeNil())
		g.Expect(st.Phase).To(Equal(v1alpha1.PhaseBlocked))
		g.Expect(st.WaitingFor).To(Equal([]string{"operator"}))
	})
	g.Expect(buildJobsByImage(g, ns, "bundle")).To(BeEmpty(), "no bundle build before the operator is Ready")

	operatorDigest := finishBuild(t, ns, "operator", jobs["operator"])
	g.Eventually(func(g Gomega) {
		jobs = buildJobsByImage(g, ns, "bundle")
		g.Expect(jobs).To(HaveKey("bundle"))
	}, operatortest.Timeout).Should(Succeed())
	// The reconcile that saw the operator Ready started the bundle's build
	// and writes both to status when it ends.
	operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.Component("operator").Ready()).To(BeTrue())
		g.Expect(env.Status.Component("bundle").WaitingFor).To(BeEmpty())
		g.Expect(env.Status.Component("bundle").Phase).To(Equal(v1alpha1.PhaseBuilding))
	})
	g.Expect(buildContainer(jobs["bundle"]).Env).To(ContainElement(corev1.EnvVar{Name: "IMG", Value: pull + "/operator@" + operatorDigest}))
	finishBuild(t, ns, "bundle", jobs["bundle"])
	env = operatortest.WaitForEnv(t, key, operatortest.ExpectReadyAndCurrent)
	bundle := *env.Status.Component("bundle").Image("bundle")

	// The same operator digest: nothing is built again.
	request := operatortest.RequestReconcile(t, env)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		g.Expect(env.Status.LastHandledReconcileAt).To(Equal(request))
	})
	g.Expect(env.Status.Component("bundle").Image("bundle").Inputs).To(Equal(bundle.Inputs))
	g.Expect(buildJobsByImage(g, ns, "bundle")["bundle"].Name).To(Equal(jobs["bundle"].Name))

	// A change to the operator only: a new operator digest, then a new
	// bundle build that reads it (the bundle's own paths did not change).
	files["cmd/operator/main.go"] += "// changed\n"
	operatortest.AppFiles(t, ns, files)
	operatortest.RequestReconcile(t, env)
	var operatorJob batchv1.Job
	g.Eventually(func(g Gomega) {
		job, ok := buildJobsByImage(g, ns, "operator")["operator"]
		g.Expect(ok).To(BeTrue())
		g.Expect(job.Status.Conditions).To(BeEmpty(), "a new operator build")
		operatorJob = job
	}, operatortest.Timeout).Should(Succeed())
	newDigest := finishBuild(t, ns, "operator", operatorJob)
	g.Expect(newDigest).NotTo(Equal(operatorDigest))
	g.Eventually(func(g Gomega) {
		job, ok := buildJobsByImage(g, ns, "bundle")["bundle"]
		g.Expect(ok).To(BeTrue())
		g.Expect(job.Name).NotTo(Equal(jobs["bundle"].Name))
		g.Expect(buildContainer(job).Env).To(ContainElement(corev1.EnvVar{Name: "IMG", Value: pull + "/operator@" + newDigest}))
	}, operatortest.Timeout).Should(Succeed())
}

// TestRunTemplateMistakesStallNamingTheField: a template naming an image
// of its own component is refused before anything is built, naming the
// field; one that closes a cycle names the cycle's path.
func TestRunTemplateMistakesStallNamingTheField(t *testing.T) {
	g := NewWithT(t)
	ns := operatortest.Namespace(t)
	operatortest.AppFiles(t, ns, map[string]string{"main.go": "package main\n"})
	image := func(name, env string) v1alpha1.ImageSpec {
		return v1alpha1.ImageSpec{Name: name, Source: "app", Run: &v1alpha1.BuildRun{Image: "golang:1.25", Command: []string{"make"},
			Env: []v1alpha1.EnvVar{{Name: "IMG", Value: env}}}}
	}
	env := operatortest.Env(ns, "mistakes").Registry().AppSource().Components(
		v1alpha1.Component{Name: "operator", Images: []v1alpha1.ImageSpec{image("operator", `{{ (image "operator").Digest }}`)}},
	).Create(t, operatortest.Admin)
	key := client.ObjectKeyFromObject(env)
	operatortest.WaitForStalled(t, key, v1alpha1.ReasonInvalidSpec, `spec.components[0].images[0].run.env[0].value`, `image "operator" is not built by a component before this one`)

	// The operator reads the bundle, which reads the operator.
	operatortest.EditSpec(t, key, func(cur *v1alpha1.DevEnvironment) {
		cur.Spec.Components = []v1alpha1.Component{
			{Name: "operator", Images: []v1alpha1.ImageSpec{image("operator", `{{ (image "bundle").Digest }}`)}},
			{Name: "bundle", Images: []v1alpha1.ImageSpec{image("bundle", `{{ (image "operator").Reference }}`)}},
		}
	})
	operatortest.WaitForStalled(t, key, v1alpha1.ReasonDependencyCycle, "spec.components[0].images[0].run.env[0].value: dependency cycle: operator -> bundle -> operator")
	g.Expect(buildJobsByImage(g, ns, "operator", "bundle")).To(BeEmpty(), "nothing is built from a spec that does not plan")
}

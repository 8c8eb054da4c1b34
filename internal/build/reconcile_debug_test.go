package build_test

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// TestDebugAnnotationBuildsADebugImage: with the image in
// devloop.dev/debug its builder Jobs build with optimizations off and
// install delve before the run step's command, whose outputs gain /dlv,
// and the Deployment runs it under delve without its liveness probe;
// with the entry removed (debug --off) new Jobs build it as written and
// the Deployment runs it as written.
func TestDebugAnnotationBuildsADebugImage(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, env := debugAPIEnv(t, debugDeployment)
	env.Spec.Components[0].Images[0].Cmd = []string{"--port=8080"}
	env.Spec.Components[0].Images[0].Run.Env = append(env.Spec.Components[0].Images[0].Run.Env, v1alpha1.EnvVar{Name: "GOFLAGS", Value: "-mod=vendor"})
	g.Expect(operatortest.Admin.Create(ctx, env)).To(Succeed())

	builder := func(g Gomega) (batchv1.Job, corev1.Container) {
		jobs := operatortest.BuilderJobs(g, ns)
		g.Expect(jobs).To(HaveKey("linux-amd64"))
		job := jobs["linux-amd64"]
		// fetch, install (the helper binary GOCACHEPROG runs), build.
		g.Expect(job.Spec.Template.Spec.InitContainers).To(HaveLen(3))
		return job, job.Spec.Template.Spec.InitContainers[2]
	}
	var debugJob batchv1.Job
	g.Eventually(func(g Gomega) {
		job, c := builder(g)
		debugJob = job
		g.Expect(c.Command).To(HaveLen(9))
		g.Expect(c.Command[:2]).To(Equal([]string{"sh", "-c"}))
		g.Expect(c.Command[2]).To(ContainSubstring("go install " + build.DelveModule + "@" + build.DelveVersion))
		g.Expect(c.Command[4:]).To(Equal([]string{"go", "build", "-o", "out/api", "./cmd/api"}))
		g.Expect(c.Env).To(ContainElement(corev1.EnvVar{Name: "GOFLAGS", Value: "-mod=vendor " + build.DebugGCFlags}))
		g.Expect(strings.Join(job.Spec.Template.Spec.Containers[0].Args, " ")).To(ContainSubstring(`"to":"/dlv"`), "the assemble step adds delve at /dlv")
	}, operatortest.Timeout).Should(Succeed())

	// The debug build lands: the Deployment runs it under delve, without
	// its liveness probe.
	finishBuild(t, ns, "api", debugJob)
	g.Eventually(func(g Gomega) {
		c := apiContainer(g, ns)
		g.Expect(c.Command).To(Equal([]string{"/dlv", "exec", "--headless", "--listen=127.0.0.1:40000", "--only-same-user=false", "--api-version=2",
			"--accept-multiclient", "--continue", "/api", "--", "--port=8080"}))
		g.Expect(c.Args).To(BeEmpty())
		g.Expect(c.LivenessProbe).To(BeNil())
		g.Expect(c.ReadinessProbe).NotTo(BeNil())
		g.Expect(apiImageStatus(g, ns).Debug).To(BeTrue(), "status says the digest deployed is a debug build")
	}, operatortest.Timeout).Should(Succeed())

	// debug --off: the annotation's entry goes, the image is built as
	// written again.
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKeyFromObject(env), env)).To(Succeed())
	patched := env.DeepCopy()
	delete(patched.Annotations, v1alpha1.DebugAnnotation)
	g.Expect(operatortest.Admin.Patch(ctx, patched, client.MergeFrom(env))).To(Succeed())
	g.Eventually(func(g Gomega) {
		job, c := builder(g)
		g.Expect(job.Name).NotTo(Equal(debugJob.Name))
		g.Expect(c.Command).To(Equal([]string{"go", "build", "-o", "out/api", "./cmd/api"}))
		g.Expect(c.Env).To(ContainElement(corev1.EnvVar{Name: "GOFLAGS", Value: "-mod=vendor"}))
		g.Expect(strings.Join(job.Spec.Template.Spec.Containers[0].Args, " ")).NotTo(ContainSubstring(`"/dlv"`))
		debugJob = job
	}, operatortest.Timeout).Should(Succeed())
	finishBuild(t, ns, "api", debugJob)
	g.Eventually(func(g Gomega) {
		c := apiContainer(g, ns)
		g.Expect(c.Command).To(BeEmpty())
		g.Expect(c.LivenessProbe).NotTo(BeNil())
		g.Expect(apiImageStatus(g, ns).Debug).To(BeFalse(), "the normal build is no debug build")
	}, operatortest.Timeout).Should(Succeed())
}

// apiImageStatus is the status of the api image of environment api.
func apiImageStatus(g Gomega, ns string) *v1alpha1.ImageStatus {
	env := &v1alpha1.DevEnvironment{}
	g.Expect(operatortest.Admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "api"}, env)).To(Succeed())
	ist := env.Status.Component("api").Image("api")
	g.Expect(ist).NotTo(BeNil())
	return ist
}

// debugDeployment runs the api image with both probes.
const debugDeployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: api}
spec:
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      containers:
      - name: api
        image: api
        livenessProbe: {httpGet: {path: /healthz, port: 8080}}
        readinessProbe: {httpGet: {path: /readyz, port: 8080}}
`

// apiContainer is the api Deployment's container once it is deployed.
func apiContainer(g Gomega, ns string) corev1.Container {
	d := &appsv1.Deployment{}
	env := &v1alpha1.DevEnvironment{}
	g.Expect(operatortest.Admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "api"}, env)).To(Succeed())
	g.Expect(operatortest.Admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "api"}, d)).To(Succeed(), "%+v", env.Status.Components)
	g.Expect(d.Spec.Template.Spec.Containers).To(HaveLen(1))
	return d.Spec.Template.Spec.Containers[0]
}

package build_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/internal/pods"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// finishJob plays the Job controller and kubelet: a pod of the Job whose
// containers ended as given, then the Job's terminal condition.
func finishJob(t *testing.T, job *batchv1.Job, initStatuses, statuses []corev1.ContainerStatus, succeeded bool) string {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: job.Name + "-" + string(job.UID)[:5],
			Labels:          map[string]string{batchv1.JobNameLabel: job.Name},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))}},
		Spec: job.Spec.Template.Spec,
	}
	g.Expect(operatortest.Admin.Create(ctx, pod)).To(Succeed())
	pod.Status.Phase = corev1.PodSucceeded
	if !succeeded {
		pod.Status.Phase = corev1.PodFailed
	}
	pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses = initStatuses, statuses
	g.Expect(operatortest.Admin.Status().Update(ctx, pod)).To(Succeed())

	now := metav1.Now()
	start := metav1.NewTime(now.Add(-time.Second))
	job.Status.StartTime = &start
	if succeeded {
		job.Status.Succeeded = 1
		job.Status.CompletionTime = &now
		job.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
		}
	} else {
		job.Status.Failed = 1
		job.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: now},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: now},
		}
	}
	g.Expect(operatortest.Admin.Status().Update(ctx, job)).To(Succeed())
	return pod.Name
}

func TestBuilderJobsBuildEveryPlatformThenTagTheIndex(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, srcDigest := apiNamespace(t)
	env := operatortest.AsDeployer(operatortest.APIEnv(ns))
	key := operatortest.CreateEnv(t, env)

	// One Job per platform, while the component says it is building.
	var jobs map[string]batchv1.Job
	g.Eventually(func(g Gomega) {
		jobs = operatortest.BuilderJobs(g, ns)
		g.Expect(jobs).To(HaveLen(2))
	}, operatortest.Timeout).Should(Succeed())
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.Components).To(HaveLen(1))
		g.Expect(env.Status.Components[0].Phase).To(Equal(v1alpha1.PhaseBuilding))
		g.Expect(env.Status.Components[0].Message).To(ContainSubstring("building image api in job"))
		g.Expect(env.Status.Component("api").Image("api").Build).NotTo(BeNil())
		g.Expect(env.Status.Component("api").Image("api").Build.Result).To(Equal(v1alpha1.BuildRunning))
	})
	operatortest.ExpectKstatus(t, env, status.InProgressStatus)

	arm := jobs["linux-arm64"]
	spec := arm.Spec.Template.Spec
	g.Expect(*arm.Spec.BackoffLimit).To(BeZero(), "a failed build is not retried with the same inputs")
	g.Expect(arm.OwnerReferences).To(HaveLen(1))
	g.Expect(arm.OwnerReferences[0].UID).To(Equal(env.UID))
	g.Expect(*spec.SecurityContext.RunAsNonRoot).To(BeTrue())
	g.Expect(spec.SecurityContext.SeccompProfile.Type).To(Equal(corev1.SeccompProfileTypeRuntimeDefault))
	g.Expect(*spec.AutomountServiceAccountToken).To(BeFalse())
	// fetch, install (the helper binary GOCACHEPROG runs), build.
	g.Expect(spec.InitContainers).To(HaveLen(3))
	fetch, install, builder, assemble := spec.InitContainers[0], spec.InitContainers[1], spec.InitContainers[2], spec.Containers[0]
	for _, c := range []corev1.Container{fetch, install, builder, assemble} {
		g.Expect(*c.SecurityContext.AllowPrivilegeEscalation).To(BeFalse(), c.Name)
		g.Expect(c.SecurityContext.Capabilities.Drop).To(ConsistOf(corev1.Capability("ALL")), c.Name)
	}
	g.Expect(fetch.Image).To(Equal(operatortest.HelperImage))
	g.Expect(strings.Join(fetch.Args, " ")).To(ContainSubstring(srcDigest.String()), "the fetch container gets the resolved digest")
	// Pinned to the tag's digest where the registry answers (not here:
	// no route to Docker Hub), else the tag as written.
	g.Expect(builder.Image).To(HavePrefix("golang:1.25"))
	g.Expect(builder.Command).To(Equal([]string{"go", "build", "-o", "out/api", "./cmd/api"}))
	g.Expect(builder.Env).To(ContainElements(
		corev1.EnvVar{Name: "GOOS", Value: "linux"}, corev1.EnvVar{Name: "GOARCH", Value: "arm64"},
		corev1.EnvVar{Name: "CGO_ENABLED", Value: "0"}))
	g.Expect(builder.VolumeMounts).To(ContainElement(corev1.VolumeMount{Name: "cache", MountPath: "/go/pkg/mod", SubPath: "p1"}))
	g.Expect(assemble.Image).To(Equal(operatortest.HelperImage))
	g.Expect(assemble.Args).To(ContainElements("assemble", "--platform", "linux/arm64"))
	pvc := &corev1.PersistentVolumeClaim{}
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: build.CacheClaimName(env, "api")}, pvc)).To(Succeed())
	g.Expect(pvc.Spec.Resources.Requests.Storage().String()).To(Equal("1Gi"))

	// Each Job's assemble container pushed its platform image by digest.
	for _, job := range jobs {
		finishBuildJob(t, job, pushRandom(g, ns+"/api"), 2)
	}

	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
	})
	img := env.Status.Component("api").Image("api")
	g.Expect(img.Build.Result).To(Equal(v1alpha1.BuildSucceeded))
	g.Expect(img.Tags).To(Equal([]string{img.ContentHash, srcDigest.Hex}))
	for _, tag := range img.Tags {
		g.Expect(operatortest.Registry.TagDigest(t, ns+"/api", tag)).To(Equal(img.Digest), "tag %s", tag)
	}
	idxRef, err := name.NewDigest(fmt.Sprintf("%s/%s/api@%s", operatortest.Registry.Host, ns, img.Digest), name.Insecure)
	g.Expect(err).NotTo(HaveOccurred())
	idx, err := remote.Index(idxRef)
	g.Expect(err).NotTo(HaveOccurred(), "two platforms make an index")
	manifest, err := idx.IndexManifest()
	g.Expect(err).NotTo(HaveOccurred())
	var platforms []string
	for _, m := range manifest.Manifests {
		platforms = append(platforms, m.Platform.OS+"/"+m.Platform.Architecture)
	}
	g.Expect(platforms).To(ConsistOf("linux/amd64", "linux/arm64"))
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)

	// A build command that fails: new Jobs replace the old ones, and the
	// failure's exit code and log tail reach status.
	operatortest.EditSpec(t, key, func(cur *v1alpha1.DevEnvironment) {
		cur.Spec.Components[0].Images[0].Run.Command = []string{"go", "build", "-o", "out/api", "./cmd/broken"}
	})
	g.Eventually(func(g Gomega) {
		next := operatortest.BuilderJobs(g, ns)
		g.Expect(next).To(HaveLen(2))
		g.Expect(next["linux-arm64"].Name).NotTo(Equal(arm.Name))
		jobs = next
	}, operatortest.Timeout).Should(Succeed())
	failed := jobs["linux-arm64"]
	operatortest.PodLogs.Set(ns, failed.Name+"-"+string(failed.UID)[:5], build.ContainerBuild, "go: downloading nothing\ncmd/broken/main.go:3:2: undefined: handler\n")
	finishJob(t, &failed,
		[]corev1.ContainerStatus{operatortest.Terminated(pods.ContainerFetch, 0, ""), operatortest.Terminated(build.ContainerBuild, 2, "")},
		nil, false)

	env = operatortest.WaitForStalled(t, key, v1alpha1.ReasonBuildFailed,
		"container build ended with exit code 2: cmd/broken/main.go:3:2: undefined: handler", "kubectl logs job/"+failed.Name+" -c build")
	b := env.Status.Component("api").Image("api").Build
	g.Expect(b.Result).To(Equal(v1alpha1.BuildFailed))
	g.Expect(b.Job).To(Equal(failed.Name))
	g.Expect(*b.ExitCode).To(Equal(int32(2)))
	g.Expect(b.LogTail).To(ContainSubstring("undefined: handler"))
	g.Expect(env.Status.Components[0].Phase).To(Equal(v1alpha1.PhaseFailed))
	operatortest.ExpectKstatus(t, env, status.FailedStatus)
}

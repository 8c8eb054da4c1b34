package testrun

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/pods"
	"github.com/devloop-dev/devloop/internal/source"
)

func TestJobName(t *testing.T) {
	long := strings.Repeat("a", 63)
	cases := []struct {
		env, suite string
		n          int64
		check      func(g Gomega, name string)
	}{
		{"volcano", "unit-tests", 3, func(g Gomega, name string) { g.Expect(name).To(Equal("volcano-unit-tests-3")) }},
		{long, "unit-tests", 12, func(g Gomega, name string) {
			g.Expect(len(name)).To(BeNumerically("<=", 63))
			g.Expect(name).To(HaveSuffix("-12"))
			g.Expect(name).NotTo(Equal(JobName(long, "unit-test", 12)), "suites differing in their tail get different names")
		}},
		{long, long, 1234567, func(g Gomega, name string) {
			g.Expect(len(name)).To(BeNumerically("<=", 63))
			g.Expect(name).To(HaveSuffix("-1234567"))
		}},
		{"env-", "-x", 1, func(g Gomega, name string) { g.Expect(name).To(Equal("env---x-1")) }},
	}
	for _, c := range cases {
		t.Run(c.suite, func(t *testing.T) {
			g := NewWithT(t)
			name := JobName(c.env, c.suite, c.n)
			c.check(g, name)
			g.Expect(validation.IsDNS1123Label(name)).To(BeEmpty(), name)
			g.Expect(JobName(c.env, c.suite, c.n)).To(Equal(name), "deterministic")
		})
	}
}

func TestJobSpec(t *testing.T) {
	suite := &v1alpha1.TestSuite{
		Name: "unit-tests", Command: []string{"make", "unit-test"},
		Env:     []v1alpha1.EnvVar{{Name: "E2E_FOCUS", Value: "queue"}, {Name: "HOME", Value: "/custom"}},
		Timeout: &metav1.Duration{Duration: 90 * time.Second},
	}
	ref := &source.Ref{Source: "app", Kind: source.KindOCI, URL: "r.test/src", Digest: "sha256:abc"}
	owner := metav1.OwnerReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: "DevEnvironment", Name: "volcano", UID: "u1"}
	cases := []struct {
		name  string
		req   JobRequest
		check func(g Gomega, req JobRequest, err error, pod corev1.PodSpec)
	}{
		{"with source", JobRequest{Source: ref, SourceSecret: "git-creds", HelperImage: "devloop:1"}, func(g Gomega, req JobRequest, err error, pod corev1.PodSpec) {
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pod.InitContainers).To(HaveLen(1))
			fetch := pod.InitContainers[0]
			g.Expect(fetch.Name).To(Equal(pods.ContainerFetch))
			g.Expect(fetch.Image).To(Equal("devloop:1"))
			g.Expect(fetch.Command).To(Equal([]string{pods.HelperBinary}))
			g.Expect(strings.Join(fetch.Args, " ")).To(ContainSubstring(`"digest":"sha256:abc"`))
			g.Expect(fetch.Args).To(ContainElements("--dest", pods.WorkspaceDir, "--credentials"))
			g.Expect(fetch.Args).NotTo(ContainElement("--cache-root"), "test pods have no build cache")
			g.Expect(pod.Volumes).To(ContainElement(HaveField("Name", "source-credentials")))
		}},
		{"without source", JobRequest{}, func(g Gomega, req JobRequest, err error, pod corev1.PodSpec) {
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pod.InitContainers).To(BeEmpty())
		}},
		{"source without helper image", JobRequest{Source: ref}, func(g Gomega, req JobRequest, err error, pod corev1.PodSpec) {
			g.Expect(err).To(MatchError(ContainSubstring("no helper image to fetch it (--helper-image)")))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			req := c.req
			req.Name, req.Namespace, req.Owner, req.Suite = "volcano-unit-tests-1", "team", owner, suite
			req.Image, req.ServiceAccount = "golang:1.25", "deployer"
			req.Labels = map[string]string{v1alpha1.LabelSuite: "unit-tests"}
			req.Env = []corev1.EnvVar{{Name: "DEVLOOP_RUN", Value: "1"}}
			job, err := Job(req)
			if err != nil {
				c.check(g, req, err, corev1.PodSpec{})
				return
			}
			g.Expect(job.Name).To(Equal("volcano-unit-tests-1"))
			g.Expect(job.OwnerReferences).To(Equal([]metav1.OwnerReference{owner}))
			g.Expect(*job.Spec.BackoffLimit).To(BeZero(), "no retries")
			// A drain's eviction is not the suite's failure: the Job runs
			// the same run in a new pod on another node (seen on two
			// nodes: without it the evicted builder Job failed).
			g.Expect(job.Spec.PodFailurePolicy).NotTo(BeNil(), "an evicted test pod would fail the run")
			g.Expect(job.Spec.PodFailurePolicy.Rules).To(ConsistOf(HaveField("Action", batchv1.PodFailurePolicyActionIgnore)))
			g.Expect(job.Spec.PodFailurePolicy.Rules[0].OnPodConditions).To(ConsistOf(HaveField("Type", corev1.DisruptionTarget)))
			g.Expect(*job.Spec.ActiveDeadlineSeconds).To(Equal(int64(90)))
			g.Expect(job.Spec.Template.Labels).To(Equal(req.Labels))
			pod := job.Spec.Template.Spec
			g.Expect(pod.RestartPolicy).To(Equal(corev1.RestartPolicyNever))
			g.Expect(pod.ServiceAccountName).To(Equal("deployer"))
			g.Expect(*pod.SecurityContext.RunAsNonRoot).To(BeTrue())
			g.Expect(*pod.SecurityContext.RunAsUser).NotTo(BeZero())
			g.Expect(pod.SecurityContext.SeccompProfile.Type).To(Equal(corev1.SeccompProfileTypeRuntimeDefault))
			g.Expect(pod.Containers).To(HaveLen(1))
			test := pod.Containers[0]
			for _, ct := range append(pod.InitContainers, test) {
				g.Expect(*ct.SecurityContext.AllowPrivilegeEscalation).To(BeFalse(), ct.Name)
				g.Expect(ct.SecurityContext.Capabilities.Drop).To(ConsistOf(corev1.Capability("ALL")), ct.Name)
				for _, m := range ct.VolumeMounts {
					g.Expect(pod.Volumes).To(ContainElement(HaveField("Name", m.Name)), "%s mounts a volume the pod lacks", ct.Name)
				}
			}
			g.Expect(test.Name).To(Equal(ContainerTest))
			g.Expect(test.Image).To(Equal("golang:1.25"))
			g.Expect(test.Command).To(Equal([]string{"make", "unit-test"}))
			g.Expect(test.WorkingDir).To(Equal("/workspace"))
			// HOME defaults to the writable emptyDir; the spec's env comes
			// last, so it wins.
			g.Expect(test.Env).To(Equal([]corev1.EnvVar{{Name: "HOME", Value: v1alpha1.BuilderHome},
				{Name: "DEVLOOP_RUN", Value: "1"}, {Name: "E2E_FOCUS", Value: "queue"}, {Name: "HOME", Value: "/custom"}}))
			g.Expect(test.VolumeMounts).To(ContainElement(corev1.VolumeMount{Name: "home", MountPath: v1alpha1.BuilderHome}))
			c.check(g, req, nil, pod)
		})
	}
}

func TestJobDefaultTimeout(t *testing.T) {
	job, err := Job(JobRequest{Name: "x", Image: "busybox", Suite: &v1alpha1.TestSuite{Name: "s", Command: []string{"true"}}})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	NewWithT(t).Expect(*job.Spec.ActiveDeadlineSeconds).To(Equal(int64(1800)))
}

// TestJobTokenOnlyWhenAsked: a test pod runs the author's code; it gets
// the ServiceAccount's token only when the suite asks for it.
func TestJobTokenOnlyWhenAsked(t *testing.T) {
	g := NewWithT(t)
	suite := &v1alpha1.TestSuite{Name: "s", Command: []string{"true"}}
	job, err := Job(JobRequest{Name: "x", Image: "busybox", ServiceAccount: "deployer", Suite: suite})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(*job.Spec.Template.Spec.AutomountServiceAccountToken).To(BeFalse())

	suite.ServiceAccountToken = true
	job, err = Job(JobRequest{Name: "x", Image: "busybox", ServiceAccount: "deployer", Suite: suite})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(*job.Spec.Template.Spec.AutomountServiceAccountToken).To(BeTrue())
}

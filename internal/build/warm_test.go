package build

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/streaming/pkg/httpstream"

	. "github.com/onsi/gomega"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/image"
	"github.com/devloop-dev/devloop/internal/pods"
	"github.com/devloop-dev/devloop/internal/source"
)

func warmRequest() JobRequest {
	return JobRequest{
		Name: "app-web-amd64-warm", Namespace: "team", HelperImage: "reg/devloop/manager@sha256:1",
		Source:   source.Ref{Source: "app", Kind: source.KindOCI, Digest: "sha256:abc"},
		Image:    image.Spec{Name: "web"},
		Platform: "linux/arm64", Registry: image.Registry{Prefix: "reg/team", Insecure: true, Compression: source.CompressionGzip},
		Run:            v1alpha1.BuildRun{Image: "golang:1.25", Command: []string{"go", "build", "-o", "out/web", "."}, KeepWarm: true},
		RegistrySecret: "regcred", SourceSecret: "gitcred",
	}
}

// TestWarmPodHashFollowsTheRunSpec: the spec hash changes with what the
// pod runs (so the pod is replaced), not with the source of a build.
func TestWarmPodHashFollowsTheRunSpec(t *testing.T) {
	g := NewWithT(t)
	hash := func(req JobRequest) string {
		pod, err := WarmPod(req)
		g.Expect(err).NotTo(HaveOccurred())
		return pod.Annotations[AnnotationSpecHash]
	}
	req := warmRequest()
	base := hash(req)
	g.Expect(base).NotTo(BeEmpty())

	other := warmRequest()
	other.Source.Digest = "sha256:def"
	g.Expect(hash(other)).To(Equal(base), "a new source is a new build, not a new pod")

	other = warmRequest()
	other.Run.Env = []v1alpha1.EnvVar{{Name: "GOFLAGS", Value: "-mod=mod"}}
	g.Expect(hash(other)).To(Equal(base), "the build's env (a revision in it) goes with each build, like its command")
	other = warmRequest()
	other.Run.Image = "golang:1.26"
	g.Expect(hash(other)).NotTo(Equal(base))
	other = warmRequest()
	other.HelperImage = "reg/devloop/manager@sha256:2"
	g.Expect(hash(other)).NotTo(Equal(base))

	pod, err := WarmPod(req)
	g.Expect(err).NotTo(HaveOccurred())
	warm := pod.Spec.Containers[0]
	g.Expect(warm.Name).To(Equal(ContainerWarm))
	g.Expect(warm.Env).To(ContainElement(HaveField("Name", "GOARCH")))
	g.Expect(warm.SecurityContext.Capabilities.Drop).NotTo(BeEmpty())
	mounts := func(c int) []string {
		var names []string
		for _, m := range pod.Spec.Containers[c].VolumeMounts {
			names = append(names, m.Name)
		}
		return names
	}
	g.Expect(mounts(0)).To(ContainElements("workspace", "tools", "cache"))
	g.Expect(mounts(0)).NotTo(ContainElements(ContainSubstring("credentials")), "the build command's container has no Secret")
	g.Expect(pod.Spec.Containers[1].Name).To(Equal(ContainerWarmAgent))
	g.Expect(pod.Spec.Containers[1].Image).To(Equal(req.HelperImage))
	g.Expect(mounts(1)).To(ContainElements("workspace", "source-credentials", "registry-credentials"))
	g.Expect(mounts(1)).NotTo(ContainElements("tmp", "cache"), "the agent shares only the workspace")
	g.Expect(*pod.Spec.ShareProcessNamespace).To(BeFalse())
	g.Expect(*pod.Spec.AutomountServiceAccountToken).To(BeFalse())
}

// TestWarmBuildStepsCarryTheBuild: fetch and push run in the agent with
// the credentials' mounted paths; the build command runs in the build
// container without any; all three name the same build token.
func TestWarmBuildStepsCarryTheBuild(t *testing.T) {
	g := NewWithT(t)
	steps, err := WarmBuildSteps(warmRequest(), "t0k3n")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(steps).To(HaveLen(3))
	fetch, run, push := steps[0], steps[1], steps[2]
	g.Expect(fetch.Container).To(Equal(ContainerWarmAgent))
	g.Expect(run.Container).To(Equal(ContainerWarm))
	g.Expect(push.Container).To(Equal(ContainerWarmAgent))
	g.Expect(fetch.Command[:3]).To(Equal([]string{pods.HelperBinary, "helper", "build"}))
	g.Expect(run.Command[:3]).To(Equal([]string{WarmHelper, "helper", "build"}))
	arg := func(cmd []string, flag string) string {
		i := slices.Index(cmd, flag)
		g.Expect(i).To(BeNumerically(">", 0), flag)
		return cmd[i+1]
	}
	for _, s := range steps {
		g.Expect(arg(s.Command, "--step")).To(Equal(s.Name))
		g.Expect(arg(s.Command, "--token")).To(Equal("t0k3n"))
	}
	var ref source.Ref
	g.Expect(json.Unmarshal([]byte(arg(fetch.Command, "--ref")), &ref)).To(Succeed())
	g.Expect(ref.Digest).To(Equal("sha256:abc"))
	g.Expect(arg(fetch.Command, "--credentials")).To(Equal(pods.SourceCredentialsDir))
	var command []string
	g.Expect(json.Unmarshal([]byte(arg(run.Command, "--command")), &command)).To(Succeed())
	g.Expect(command).To(Equal([]string{"go", "build", "-o", "out/web", "."}))
	g.Expect(arg(run.Command, "--timeout")).To(Equal(DefaultBuildTimeout.String()))
	g.Expect(strings.Join(run.Command, " ")).NotTo(ContainSubstring("credentials"))
	g.Expect(run.Command).NotTo(ContainElement("--docker-config"))
	g.Expect(arg(push.Command, "--platform")).To(Equal("linux/arm64"))
	var reg RegistryConfig
	g.Expect(json.Unmarshal([]byte(arg(push.Command, "--registry")), &reg)).To(Succeed())
	g.Expect(reg).To(Equal(RegistryConfig{Prefix: "reg/team", Insecure: true, Compression: source.CompressionGzip}))
	g.Expect(arg(push.Command, "--docker-config")).To(Equal(registryCredentialsDir + "/.dockerconfigjson"))
}

// TestNamesDoNotCollide: names are a readable prefix and a hash of the
// whole identity, so dashes cannot make two identities one name, and long
// names still fit 63 characters.
func TestNamesDoNotCollide(t *testing.T) {
	g := NewWithT(t)
	g.Expect(WarmPodName("a", "b-c", "linux/amd64")).NotTo(Equal(WarmPodName("a-b", "c", "linux/amd64")))
	g.Expect(builderJobName("a", "b-c", "linux/amd64", "sha256:1")).NotTo(Equal(builderJobName("a-b", "c", "linux/amd64", "sha256:1")))
	g.Expect(WarmPodName("a", "b-c", "linux/amd64")).To(HavePrefix("a-b-c-amd64-"))
	g.Expect(WarmPodName("a", "b-c", "linux/amd64")).To(HaveSuffix("-warm"))

	long := strings.Repeat("x", 60)
	for _, n := range []string{
		WarmPodName(long, long, "linux/arm/v7"), WarmPodName(long, long+"y", "linux/arm/v7"),
		builderJobName(long, long, "linux/amd64", "sha256:1"),
	} {
		g.Expect(len(n)).To(BeNumerically("<=", 63), n)
		g.Expect(validation.IsDNS1123Label(n)).To(BeEmpty(), n)
	}
	g.Expect(WarmPodName(long, long, "linux/arm/v7")).NotTo(Equal(WarmPodName(long, long+"y", "linux/arm/v7")))
	// The documented hash: printf '%s\n%s\n%s' a b-c linux/amd64 | sha256sum | cut -c1-8
	sum := sha256.Sum256([]byte("a\nb-c\nlinux/amd64"))
	g.Expect(WarmPodName("a", "b-c", "linux/amd64")).To(Equal("a-b-c-amd64-" + hex.EncodeToString(sum[:])[:8] + "-warm"))

	// Label values: kept when valid, else readable and hashed.
	g.Expect(v1alpha1.LabelValue("web")).To(Equal("web"))
	for _, v := range []string{"tools/ginkgo", strings.Repeat("e", 100), strings.Repeat("e", 100) + "f"} {
		g.Expect(validation.IsValidLabelValue(v1alpha1.LabelValue(v))).To(BeEmpty(), v)
	}
	g.Expect(v1alpha1.LabelValue(strings.Repeat("e", 100))).NotTo(Equal(v1alpha1.LabelValue(strings.Repeat("e", 100) + "f")))
}

// TestBuildTimeoutIsCapped: run.timeout, else the default, never above the
// operator's maximum.
func TestBuildTimeoutIsCapped(t *testing.T) {
	g := NewWithT(t)
	g.Expect(capTimeout(&v1alpha1.BuildRun{}, 0)).To(Equal(DefaultBuildTimeout))
	g.Expect(capTimeout(&v1alpha1.BuildRun{Timeout: &metav1.Duration{Duration: time.Hour}}, 0)).To(Equal(time.Hour))
	g.Expect(capTimeout(&v1alpha1.BuildRun{Timeout: &metav1.Duration{Duration: 100 * time.Hour}}, 0)).To(Equal(DefaultMaxBuildTimeout))
	g.Expect(capTimeout(&v1alpha1.BuildRun{Timeout: &metav1.Duration{Duration: time.Hour}}, 30*time.Minute)).To(Equal(30 * time.Minute))
	job, err := BuilderJob(JobRequest{Name: "j", Run: v1alpha1.BuildRun{Image: "golang", Timeout: &metav1.Duration{Duration: time.Hour}}, MaxTimeout: 20 * time.Minute})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(*job.Spec.ActiveDeadlineSeconds).To(BeEquivalentTo(20 * 60))
}

// TestExecRefusedReadsTheStatus: a 403 is told by its API status, bare or
// inside the websocket upgrade's error, not by the word in a message.
func TestExecRefusedReadsTheStatus(t *testing.T) {
	g := NewWithT(t)
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "pods/exec"}, "x", errors.New("no"))
	g.Expect(execRefused(forbidden)).To(BeTrue())
	g.Expect(execRefused(fmt.Errorf("step fetch: %w", forbidden))).To(BeTrue())
	g.Expect(execRefused(fmt.Errorf("step fetch: %w", &httpstream.UpgradeFailureError{Cause: forbidden}))).To(BeTrue())
	g.Expect(execRefused(errors.New("build output: forbidden import of package internal"))).To(BeFalse())
	g.Expect(execRefused(apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "x"))).To(BeFalse())
}

// TestWarmPodStateIsTheAgentsOnly: the state the agent answers from (its
// push results) is on a volume only the agent mounts: the build
// container, which runs the author's command, cannot write it, nor can
// any other container.
func TestWarmPodStateIsTheAgentsOnly(t *testing.T) {
	g := NewWithT(t)
	req := warmRequest()
	pod, err := WarmPod(req)
	g.Expect(err).NotTo(HaveOccurred())
	steps, err := WarmBuildSteps(req, "t1")
	g.Expect(err).NotTo(HaveOccurred())
	for _, step := range steps {
		if step.Name != WarmStepPush {
			continue
		}
		i := slices.Index(step.Command, "--state")
		g.Expect(i).To(BeNumerically(">", 0), "the push step names its state directory: %v", step.Command)
		state := step.Command[i+1]
		var volume string
		for _, c := range pod.Spec.Containers {
			for _, m := range c.VolumeMounts {
				if m.MountPath == state {
					g.Expect(c.Name).To(Equal(ContainerWarmAgent), "the state is mounted in %s", c.Name)
					g.Expect(m.ReadOnly).To(BeFalse())
					volume = m.Name
				}
			}
		}
		g.Expect(volume).NotTo(BeEmpty(), "the agent mounts %s", state)
		g.Expect(volume).NotTo(Equal(pods.VolumeWorkspace))
		for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
			if c.Name == ContainerWarmAgent {
				continue
			}
			for _, m := range c.VolumeMounts {
				g.Expect(m.Name).NotTo(Equal(volume), "container %s mounts the agent's state", c.Name)
			}
		}
	}
}

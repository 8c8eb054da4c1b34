package build

import (
	"encoding/json"
	"slices"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/pods"
	"github.com/devloop-dev/devloop/internal/source"
)

func warmRequest() JobRequest {
	return JobRequest{
		Name: "app-web-amd64-warm", Namespace: "team", HelperImage: "reg/devloop/manager@sha256:1",
		Source:   source.Ref{Source: "app", Kind: source.KindOCI, Digest: "sha256:abc"},
		Image:    Image{Name: "web"},
		Platform: "linux/arm64", Registry: Registry{Prefix: "reg/team", Insecure: true, Compression: source.CompressionGzip},
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
	g.Expect(hash(other)).NotTo(Equal(base))
	other = warmRequest()
	other.Run.Image = "golang:1.26"
	g.Expect(hash(other)).NotTo(Equal(base))
	other = warmRequest()
	other.HelperImage = "reg/devloop/manager@sha256:2"
	g.Expect(hash(other)).NotTo(Equal(base))

	pod, err := WarmPod(req)
	g.Expect(err).NotTo(HaveOccurred())
	warm := pod.Spec.Containers[0]
	g.Expect(warm.Env).To(ContainElement(HaveField("Name", "GOARCH")))
	g.Expect(warm.SecurityContext.Capabilities.Drop).NotTo(BeEmpty())
	var mounts []string
	for _, m := range warm.VolumeMounts {
		mounts = append(mounts, m.Name)
	}
	g.Expect(mounts).To(ContainElements("workspace", "tools", "cache", "source-credentials", "registry-credentials"))
}

// TestWarmBuildCommandCarriesTheBuild: the exec'd command names the
// resolved source, the command and the credentials' mounted paths.
func TestWarmBuildCommandCarriesTheBuild(t *testing.T) {
	g := NewWithT(t)
	cmd, err := WarmBuildCommand(warmRequest())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cmd[:3]).To(Equal([]string{WarmHelper, "helper", "build"}))
	arg := func(flag string) string {
		i := slices.Index(cmd, flag)
		g.Expect(i).To(BeNumerically(">", 0), flag)
		return cmd[i+1]
	}
	var ref source.Ref
	g.Expect(json.Unmarshal([]byte(arg("--ref")), &ref)).To(Succeed())
	g.Expect(ref.Digest).To(Equal("sha256:abc"))
	var command []string
	g.Expect(json.Unmarshal([]byte(arg("--command")), &command)).To(Succeed())
	g.Expect(command).To(Equal([]string{"go", "build", "-o", "out/web", "."}))
	g.Expect(arg("--platform")).To(Equal("linux/arm64"))
	g.Expect(arg("--credentials")).To(Equal(pods.SourceCredentialsDir))
	var reg RegistryConfig
	g.Expect(json.Unmarshal([]byte(arg("--registry")), &reg)).To(Succeed())
	g.Expect(reg).To(Equal(RegistryConfig{Prefix: "reg/team", Insecure: true, Compression: source.CompressionGzip}))
	g.Expect(arg("--docker-config")).To(Equal(registryCredentialsDir + "/.dockerconfigjson"))
}

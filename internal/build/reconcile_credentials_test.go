package build_test

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/internal/pods"
	"github.com/devloop-dev/devloop/internal/teamcache"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// secretsSeenBy maps each container of spec (init containers included)
// to the Secrets it can read: mounted volumes of Secrets (projected ones
// too) and environment variables taken from Secrets.
func secretsSeenBy(spec corev1.PodSpec) map[string][]string {
	volumes := map[string][]string{}
	for _, v := range spec.Volumes {
		if v.Secret != nil {
			volumes[v.Name] = append(volumes[v.Name], v.Secret.SecretName)
		}
		if v.Projected != nil {
			for _, p := range v.Projected.Sources {
				if p.Secret != nil {
					volumes[v.Name] = append(volumes[v.Name], p.Secret.Name)
				}
				// A token for the team build cache's audience only is no
				// credential to the API server nor to anything else.
				if p.ServiceAccountToken != nil && p.ServiceAccountToken.Audience != teamcache.DefaultAudience {
					volumes[v.Name] = append(volumes[v.Name], "serviceaccount-token")
				}
			}
		}
	}
	out := map[string][]string{}
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		var seen []string
		for _, m := range c.VolumeMounts {
			seen = append(seen, volumes[m.Name]...)
		}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				seen = append(seen, e.ValueFrom.SecretKeyRef.Name)
			}
		}
		for _, e := range c.EnvFrom {
			if e.SecretRef != nil {
				seen = append(seen, e.SecretRef.Name)
			}
		}
		out[c.Name] = seen
	}
	return out
}

// expectAuthorContainersSeeNoSecret checks that every container running
// the author's image (run.image) reads no Secret and that the pod has no
// ServiceAccount token nor a shared process namespace; it returns what the
// other containers see.
func expectAuthorContainersSeeNoSecret(g Gomega, spec corev1.PodSpec, authorImage string) map[string][]string {
	seen := secretsSeenBy(spec)
	authors := 0
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		if c.Image == authorImage {
			authors++
			g.Expect(seen[c.Name]).To(BeEmpty(), "container %s runs the author's command and must not see a Secret", c.Name)
		}
	}
	g.Expect(authors).To(Equal(1), "one container runs the author's command")
	// What a container with credentials shares with the author's: the
	// workspace, and the cache it creates directories in; never /tmp.
	mounts := map[string]map[string]bool{}
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		mounts[c.Name] = map[string]bool{}
		for _, m := range c.VolumeMounts {
			mounts[c.Name][m.Name] = true
		}
	}
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		if c.Image != authorImage {
			continue
		}
		for other, volumes := range mounts {
			if other == c.Name || len(seen[other]) == 0 {
				continue
			}
			for v := range volumes {
				if mounts[c.Name][v] {
					g.Expect(v).To(BeElementOf(pods.VolumeWorkspace, "cache"), "container %s (with credentials) shares volume %s with %s", other, v, c.Name)
				}
			}
		}
	}
	g.Expect(spec.AutomountServiceAccountToken).NotTo(BeNil())
	g.Expect(*spec.AutomountServiceAccountToken).To(BeFalse())
	g.Expect(spec.ShareProcessNamespace == nil || !*spec.ShareProcessNamespace).To(BeTrue(), "no view of the credential holder's processes")
	return seen
}

// TestBuildCommandsSeeNoCredentials (issue 17, crossing 7): the container
// that runs the author's build command — in a warm builder and in a
// builder Job — mounts no Secret and gets none in its environment, while
// the source and registry credentials still reach the containers that
// fetch and push, and the build succeeds with them.
func TestBuildCommandsSeeNoCredentials(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, _ := apiNamespace(t)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "regcred"},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(fmt.Sprintf(`{"auths":{%q:{"auth":"ZGV2OnM="}}}`, operatortest.Registry.Host))},
	}
	g.Expect(operatortest.Admin.Create(ctx, secret)).To(Succeed())
	withCredentials := func(env *v1alpha1.DevEnvironment) *v1alpha1.DevEnvironment {
		env.Spec.Registry.CredentialsRef = &v1alpha1.LocalObjectReference{Name: "regcred"}
		env.Spec.Sources[0].OCI.SecretRef = &v1alpha1.LocalObjectReference{Name: "regcred"}
		return env
	}

	// A warm builder.
	warmEnv := withCredentials(warmAPIEnv(ns))
	operatortest.WarmExec.Answer(func(command []string, stdout, _ io.Writer) error {
		if !operatortest.IsStep(command, build.WarmStepPush) {
			return nil
		}
		_, err := fmt.Fprintf(stdout, "{\"digest\":%q}\n", pushRandom(g, ns+"/api"))
		return err
	})
	g.Expect(operatortest.Admin.Create(ctx, warmEnv)).To(Succeed())
	pod := &corev1.Pod{}
	podKey := client.ObjectKey{Namespace: ns, Name: warmAPIPod}
	g.Eventually(func() error { return operatortest.Admin.Get(ctx, podKey, pod) }, operatortest.Timeout).Should(Succeed())
	seen := expectAuthorContainersSeeNoSecret(g, pod.Spec, "golang:1.25")
	g.Expect(seen[build.ContainerWarmAgent]).To(ContainElement("regcred"), "the fetching and pushing container has the credentials")

	operatortest.RunPod(t, ns, warmAPIPod)
	warmEnv = operatortest.WaitForEnv(t, client.ObjectKeyFromObject(warmEnv), operatortest.ExpectReadyAndCurrent)
	// fakeExec refuses a step exec'd into another container than
	// WarmBuildSteps names; the credentials' paths are only given to the
	// agent's steps.
	g.Expect(operatortest.WarmExec.CallsWith("--step fetch --token")).To(BeNumerically(">=", 1))
	for _, c := range operatortest.WarmExec.Calls() {
		joined := strings.Join(c, " ")
		if strings.Contains(joined, "--step run") {
			g.Expect(joined).NotTo(ContainSubstring("credentials"))
		}
		if strings.Contains(joined, "--step push") && strings.Contains(joined, ns) {
			g.Expect(c).To(ContainElement("--docker-config"))
		}
		if strings.Contains(joined, "--step fetch") && strings.Contains(joined, ns) {
			g.Expect(c).To(ContainElement(pods.SourceCredentialsDir))
		}
	}
	operatortest.ExpectKstatus(t, warmEnv, status.CurrentStatus)

	// A builder Job: fetch and assemble have the credentials, the build
	// step none.
	jobEnv := withCredentials(amd64APIEnv(ns))
	jobEnv.Name = "api-jobs"
	g.Expect(operatortest.Admin.Create(ctx, jobEnv)).To(Succeed())
	var jobSpec corev1.PodSpec
	g.Eventually(func(g Gomega) {
		jobs := operatortest.BuilderJobs(g, ns)
		g.Expect(jobs).To(HaveKey("linux-amd64"))
		job := jobs["linux-amd64"]
		g.Expect(job.Labels).To(HaveKeyWithValue(v1alpha1.LabelEnvironment, "api-jobs"))
		jobSpec = job.Spec.Template.Spec
	}, operatortest.Timeout).Should(Succeed())
	seen = expectAuthorContainersSeeNoSecret(g, jobSpec, "golang:1.25")
	g.Expect(seen[pods.ContainerFetch]).To(ContainElement("regcred"))
	g.Expect(seen[build.ContainerAssemble]).To(ContainElement("regcred"))
	g.Expect(seen[build.ContainerBuild]).To(BeEmpty())
	jobEnv = operatortest.WaitForPhase(t, client.ObjectKeyFromObject(jobEnv), v1alpha1.PhaseBuilding)
	operatortest.ExpectKstatus(t, jobEnv, status.InProgressStatus)
}

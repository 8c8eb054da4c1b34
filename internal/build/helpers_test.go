package build_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/internal/pods"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// warmAPIPod is the name of the warm builder of APIEnv's image for
// linux/amd64.
var warmAPIPod = build.WarmPodName("api", "api", "linux/amd64")

// apiNamespace is the prologue of the run-step tests: a namespace with the
// ServiceAccount operatortest.Deployer and APIEnv's source, a program of
// its own (the namespace is in it, so WarmExec.CallsWith can count the
// execs naming its digest). It returns the namespace and that digest.
func apiNamespace(t *testing.T) (string, v1.Hash) {
	t.Helper()
	ns := operatortest.Namespace(t)
	operatortest.CreateDeployer(t, ns, operatortest.Deployer)
	return ns, operatortest.AppFiles(t, ns, map[string]string{"cmd/api/main.go": "package main // " + ns + "\nfunc main() {}\n"})
}

// amd64APIEnv is APIEnv acting as the deployer, built by a builder Job
// for linux/amd64 only.
func amd64APIEnv(ns string) *v1alpha1.DevEnvironment {
	env := operatortest.AsDeployer(operatortest.APIEnv(ns))
	env.Spec.Components[0].Images[0].Platforms = []string{"linux/amd64"}
	return env
}

// warmAPIEnv is amd64APIEnv built in a warm builder (run.keepWarm),
// whose pod is warmAPIPod.
func warmAPIEnv(ns string) *v1alpha1.DevEnvironment {
	env := amd64APIEnv(ns)
	env.Spec.Components[0].Images[0].Run.KeepWarm = true
	return env
}

// pushRandom pushes a random platform image to the registry's repo
// ("ns/image"), as a builder's push would, and returns its digest.
func pushRandom(g Gomega, repo string) v1.Hash {
	img, err := random.Image(256, 1)
	g.Expect(err).NotTo(HaveOccurred())
	d, err := img.Digest()
	g.Expect(err).NotTo(HaveOccurred())
	ref, err := name.NewDigest(fmt.Sprintf("%s/%s@%s", operatortest.Registry.Host, repo, d), name.Insecure)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(remote.Write(ref, img)).To(Succeed())
	return d
}

// finishBuildJob ends a builder Job as one that built and pushed: fetch
// and build exited 0, and the assemble container reported digest.
func finishBuildJob(t *testing.T, job batchv1.Job, digest v1.Hash, uploaded int) {
	t.Helper()
	report, _ := json.Marshal(build.AssembleReport{Digest: digest.String(), Uploaded: uploaded})
	finishJob(t, &job,
		[]corev1.ContainerStatus{operatortest.Terminated(pods.ContainerFetch, 0, ""), operatortest.Terminated(build.ContainerBuild, 0, "")},
		[]corev1.ContainerStatus{operatortest.Terminated(build.ContainerAssemble, 0, string(report))}, true)
}

// webNamespace is the prologue of the in-process build tests: a
// namespace with WebEnv's source.
func webNamespace(t *testing.T) string {
	t.Helper()
	ns := operatortest.Namespace(t)
	operatortest.AppFiles(t, ns, operatortest.WebFiles("binary"))
	return ns
}

// waitForWebBuilt waits until WebEnv's environment at key is Ready for its
// generation with image web recorded, and returns it.
func waitForWebBuilt(t *testing.T, key client.ObjectKey) *v1alpha1.DevEnvironment {
	t.Helper()
	return operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		g.Expect(env.Status.Component("web").Image("web")).NotTo(BeNil())
	})
}

// debugAPIEnv is amd64APIEnv in a namespace of its own, deploying the
// manifest deployment with the api image in devloop.dev/debug: the
// debug tests' common start (the caller creates it).
func debugAPIEnv(t *testing.T, deployment string) (string, *v1alpha1.DevEnvironment) {
	t.Helper()
	ns := operatortest.Namespace(t)
	operatortest.UseDeployEngine(ns)
	operatortest.AppFiles(t, ns, map[string]string{"cmd/api/main.go": "package main\nfunc main() {}\n",
		"deploy/api.yaml": deployment})
	operatortest.CreateDeployer(t, ns, "deployer")
	env := amd64APIEnv(ns)
	env.Spec.Components[0].Manifests.Paths = []string{"deploy"}
	env.Annotations = map[string]string{v1alpha1.DebugAnnotation: "api/api"}
	return ns, env
}

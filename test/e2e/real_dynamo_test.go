//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/devcluster"
	"github.com/devloop-dev/devloop/internal/message"
	"github.com/devloop-dev/devloop/test/e2e/poll"
)

// dynamoTreeVar names the deploy/ directory of a checkout of
// github.com/ai-dynamo/dynamo: the Go module proxy does not serve it, so
// CI has no tree.
const dynamoTreeVar = "DEVLOOP_DYNAMO_TREE"

// dynamoPodLabels select the operator's pod in its chart.
var dynamoPodLabels = map[string]string{"control-plane": "controller-manager"}

// TestRealDynamo runs Dynamo's operator loop (its deploy/operator/Tiltfile)
// on its real tree with config/samples/dynamo.yaml, changing only what
// this cluster differs in: the operator and crd-apply compiled in the
// cluster in one run step, the CRDs applied, the operator chart installed
// with the image injected, its crd-apply init container and manager
// running the built digest; then an edit of the manager, pushed as
// `kubectl devloop push` does, to the new code logging in the pod, with
// how it got there (live update or rollout). Figures are logged with the
// load. `make real-dynamo DYNAMO_TREE=DIR` runs it; `make e2e` skips it.
func TestRealDynamo(t *testing.T) {
	tree := realTree(t, dynamoTreeVar, "the deploy/ directory of a checkout of github.com/ai-dynamo/dynamo (make real-dynamo DYNAMO_TREE=DIR)")
	c := need(t)
	g := NewWithT(t)
	ctx := context.Background()
	goproxy := hostGoProxy(t, filepath.Join(tree, "operator"))

	ns := namespace(t, "e2e-dynamo")
	// Pod Security baseline, not restricted: the chart's manager sets no
	// seccompProfile, and restricted refuses its pod (the Deployment's
	// ReplicaFailure says so).
	releaseNS := namespace(t, "e2e-dynamo-system")
	relabelNamespace(t, releaseNS, map[string]any{"pod-security.kubernetes.io/enforce": "baseline"})
	allowClusterAdmin(t, ns, "deployer")
	env := localDynamo(t, tree, ns, releaseNS, goproxy)
	key := client.ObjectKeyFromObject(env)
	deleteOnCleanup(t, env)
	t.Logf("load before: %s", loadAverage())
	pushDir(t, env, tree)

	start := time.Now()
	g.Expect(c.Client.Create(ctx, env)).To(Succeed())
	env = waitEnv(t, key, 75*time.Minute, false, readyNow)
	built := imageOf(env, "dynamo-operator").Digest
	pod := waitDynamoOperator(t, releaseNS, built, "Operator version configured")
	cold := time.Since(start)
	t.Logf("first Ready, cold: operator pod %s on %s (crd-apply init container done) %s after the apply; load %s",
		pod, built, cold.Round(time.Second), loadAverage())

	mark := editDynamo(t, tree, 1)
	start = time.Now()
	push(t, env, tree)
	env = waitNewDigest(t, key, "dynamo-operator", built)
	rebuilt := imageOf(env, "dynamo-operator")
	manager := waitDynamoOperator(t, releaseNS, "", mark)
	edit := time.Since(start)
	t.Logf("Dynamo figures: first Ready cold %s; edit → new manager code logging %s; %s (%s); load %s",
		cold.Round(time.Second), edit.Round(100*time.Millisecond), mark, rebuilt.UpdateReason, loadAverage())

	warm := warmDynamoBuild(t, env, tree, goproxy)

	// The unit suite: envtest's binaries pushed as the sample says, the
	// suite's image (on demand) built when it is triggered.
	pushEnvtestAssets(t, env)
	revision := componentOf(env, "platform").Release.Revision
	cold1, suiteCold := runSuiteOnly(t, key, "unit-tests", 1)
	// The suite's image, built on demand, is no image the chart uses: the
	// release is not upgraded and the live-updated manager stays in place
	// (a suite's trigger rolled it out before 2026-11-29).
	cur := &v1alpha1.DevEnvironment{}
	g.Expect(dc.Client.Get(ctx, key, cur)).To(Succeed())
	g.Expect(componentOf(cur, "platform").Release.Revision).To(Equal(revision), "the suite's trigger upgraded the release")
	pods := &corev1.PodList{}
	g.Expect(dc.Client.List(ctx, pods, client.InNamespace(releaseNS), client.MatchingLabels(dynamoPodLabels))).To(Succeed())
	var names []string
	for _, p := range pods.Items {
		names = append(names, p.Name)
	}
	g.Expect(names).To(Equal([]string{manager}), "the manager pod the live update kept, alone")
	if os.Getenv("DEVLOOP_ENVTEST_OWN") == "" {
		// This cluster's envtest (1.37), not the project's (1.29): the
		// outcome is the tree's against that version (9 specs of
		// internal/controller write a Job status 1.37 refuses), reported.
		t.Logf("Dynamo figures: first Ready cold %s, warm (second environment, first's cache) %s; edit → new manager code %s (%s); unit suite run #1 %s in %s against envtest binaries not the project's version (%s); load %s",
			cold.Round(time.Second), warm.Round(time.Second), edit.Round(100*time.Millisecond), rebuilt.UpdateReason,
			cold1.Result, suiteCold.Round(time.Second), message.Truncate(cold1.Message, 200), loadAverage())
		return
	}
	g.Expect(cold1.Result).To(Equal(v1alpha1.ResultPassed), "run #1: %s\n%s", cold1.Message, cold1.LogTail)
	suiteWarm := runSuite(t, key, "unit-tests", 2)
	t.Logf("Dynamo figures: first Ready cold %s, warm (second environment, first's cache) %s; edit → new manager code %s (%s); unit suite cold %s (its image built on demand included), warm %s; load %s",
		cold.Round(time.Second), warm.Round(time.Second), edit.Round(100*time.Millisecond), rebuilt.UpdateReason,
		suiteCold.Round(time.Second), suiteWarm.Round(time.Second), loadAverage())
}

// warmDynamoBuild builds the operator's image in a second environment
// reading the first one's build cache (warmBuild). Only the image: the
// chart's cluster-scoped objects belong to the first.
func warmDynamoBuild(t *testing.T, first *v1alpha1.DevEnvironment, tree, goproxy string) time.Duration {
	t.Helper()
	envB := localDynamo(t, tree, namespace(t, "e2e-dynamo-b"), "unused", goproxy)
	platform := envB.Spec.Components[1]
	NewWithT(t).Expect(platform.Name).To(Equal("platform"))
	platform.DependsOn, platform.Helm = nil, nil
	envB.Spec.Components = []v1alpha1.Component{platform}
	return warmBuild(t, first, envB, tree)
}

// pushEnvtestAssets pushes envtest's kube-apiserver and etcd (from
// DEVLOOP_ENVTEST_ASSETS: the project's own version, 1.29, as make test
// gets it, when built; else this cluster's) as env's source "envtest", as
// the sample's comment tells a team to push theirs.
func pushEnvtestAssets(t *testing.T, env *v1alpha1.DevEnvironment) {
	t.Helper()
	assets := os.Getenv("DEVLOOP_ENVTEST_ASSETS")
	if assets == "" {
		t.Fatal("DEVLOOP_ENVTEST_ASSETS is not set: the directory of envtest's kube-apiserver and etcd (make real-dynamo sets it)")
	}
	t.Logf("envtest's binaries from %s", assets)
	dir := t.TempDir()
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		data, err := os.ReadFile(filepath.Join(assets, bin))
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		NewWithT(t).Expect(os.WriteFile(filepath.Join(dir, bin), data, 0o755)).To(Succeed())
	}
	src := env.Spec.Source("envtest")
	NewWithT(t).Expect(src).NotTo(BeNil(), "the sample's envtest source")
	start := time.Now()
	_, err := devcluster.PushSource(context.Background(), dir, src.OCI.Repository+":"+src.OCI.Tag)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	t.Logf("envtest's kube-apiserver and etcd pushed as source envtest in %s", time.Since(start).Round(100*time.Millisecond))
}

// localDynamo is config/samples/dynamo.yaml on the local cluster: sources
// and images under ns on the cluster's registry, the cluster's builder and
// base (nodes pull from no public registry; busybox, so the image names
// the distroless base's user), modules from the host (goproxy). The chart
// is the sample's, the platform umbrella chart: its other dependencies
// (NATS, etcd, KAI scheduler, Grove) come from chart repositories this
// cluster cannot reach, and the values turn them off, so devloop fetches
// none of them (Helm's own CLI wants every one present, enabled or not).
// The sample keeps NATS on; this turns it off, as there is no NATS here.
func localDynamo(t *testing.T, tree, ns, releaseNS, goproxy string) *v1alpha1.DevEnvironment {
	t.Helper()
	g := NewWithT(t)
	env := readSample(t, "dynamo.yaml")
	env.Namespace = ns
	env.Spec.ServiceAccountName = "deployer"
	env.Spec.Registry = &v1alpha1.RegistrySpec{Prefix: registry + "/" + ns, Insecure: true}
	env.Spec.Sources[0] = v1alpha1.Source{Name: env.Spec.Sources[0].Name,
		OCI: &v1alpha1.OCISource{Repository: registry + "/" + ns + "/src", Tag: "dev", Insecure: true}}
	platform := &env.Spec.Components[1]
	g.Expect(platform.Images).To(HaveLen(1))
	img := &platform.Images[0]
	img.Base = busybox
	img.Run.Image = goImage
	img.Run.Env = append(img.Run.Env, v1alpha1.EnvVar{Name: "GOPATH", Value: "/go"}, v1alpha1.EnvVar{Name: "GOPROXY", Value: goproxy},
		v1alpha1.EnvVar{Name: "GOSUMDB", Value: "off"}, v1alpha1.EnvVar{Name: "GOTOOLCHAIN", Value: "local"})
	// The unit suite's image: the cluster's Go builder with the pushed
	// envtest binaries, and modules from the host.
	tools := &env.Spec.Components[2]
	g.Expect(tools.Name).To(Equal("test-tools"))
	tools.Images[0].Base = goImage
	g.Expect(env.Spec.Sources[1].Name).To(Equal("envtest"))
	env.Spec.Sources[1].OCI = &v1alpha1.OCISource{Repository: registry + "/" + ns + "/envtest", Tag: "dev", Insecure: true}
	g.Expect(env.Spec.Tests).To(HaveLen(1))
	env.Spec.Tests[0].Env = append(env.Spec.Tests[0].Env, v1alpha1.EnvVar{Name: "GOPROXY", Value: goproxy},
		v1alpha1.EnvVar{Name: "GOSUMDB", Value: "off"}, v1alpha1.EnvVar{Name: "GOTOOLCHAIN", Value: "local"})
	h := platform.Helm
	g.Expect(h.Chart.Path).To(Equal("helm/charts/platform"), "the umbrella chart")
	h.Namespace = releaseNS
	var values map[string]any
	g.Expect(json.Unmarshal(h.Values.Raw, &values)).To(Succeed())
	values["nats"] = map[string]any{"enabled": false}
	global, _ := values["global"].(map[string]any)
	g.Expect(global).NotTo(BeNil(), "the sample's global values")
	global["nats"] = map[string]any{"install": false}
	raw, err := json.Marshal(values)
	g.Expect(err).NotTo(HaveOccurred())
	h.Values = &apiextensionsv1.JSON{Raw: raw}
	return env
}

// waitDynamoOperator waits for a Ready operator pod in ns whose manager
// runs digest (any digest when "") and has logged line, and returns its
// name.
func waitDynamoOperator(t *testing.T, ns, digest, line string) string {
	t.Helper()
	return waitPodLogging(t, poll.Wait{What: fmt.Sprintf("a Ready Dynamo operator pod of %q logging %q", digest, line), Every: time.Second, Within: 15 * time.Minute},
		ns, dynamoPodLabels, "manager", imageByDigest(digest), line)
}

// editDynamo adds a mark to the manager's "Operator version configured"
// log line, an edit whose new code shows in the running manager's log.
func editDynamo(t *testing.T, tree string, n int) string {
	t.Helper()
	mark := fmt.Sprintf("devloop edit %d", n)
	markLogLine(t, filepath.Join(tree, "operator", "cmd", "main.go"), `setupLog.Info("Operator version configured"`, mark)
	return mark
}

// relabelNamespace sets labels on namespace ns.
func relabelNamespace(t *testing.T, ns string, labels map[string]any) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	NewWithT(t).Expect(dc.Client.Patch(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		client.RawPatch(types.MergePatchType, patch))).To(Succeed())
}

// realTree is a copy of the real project's tree the variable names (its
// edits stay in the copy); the test is skipped where there is none, and
// when DEVLOOP_E2E_REAL=skip (make e2e: each real project has a target).
func realTree(t *testing.T, variable, what string) string {
	t.Helper()
	if os.Getenv("DEVLOOP_E2E_REAL") == "skip" {
		t.Skip("the real projects' loops run by their own targets")
	}
	src := os.Getenv(variable)
	if src == "" {
		t.Skip(variable + " is not set: " + what)
	}
	return copyDir(t, src)
}

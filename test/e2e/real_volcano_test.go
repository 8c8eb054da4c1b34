//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/e2e/poll"
)

// volcanoTreeVar names a checkout of github.com/volcano-sh/volcano: the
// Go module proxy does not serve it, so CI has no tree.
const volcanoTreeVar = "DEVLOOP_VOLCANO_TREE"

// volcanoSchedulerLabels select the scheduler's pod in the chart.
var volcanoSchedulerLabels = map[string]string{"app": "volcano-scheduler"}

// TestRealVolcano runs Volcano's loop on its real tree with
// config/samples/volcano.yaml, changing only what this cluster differs
// in: the three images compiled in the cluster by the tree's own `make
// vc-*` through one run spec, taking turns on one cache claim; the chart
// released with the images pinned; the scheduler running the built
// digest. Then an edit of the scheduler, pushed as `kubectl devloop push`
// does, to the new code logging in the pod (only the scheduler's digest
// moves); then a second environment in another namespace building the
// same tree's images warm, reading the first's cache (the chart is the
// first's: Volcano is cluster-wide). Figures are logged with the load.
// `make real-volcano VOLCANO_TREE=DIR` runs it; `make e2e` skips it.
func TestRealVolcano(t *testing.T) {
	tree := realTree(t, volcanoTreeVar, "a checkout of github.com/volcano-sh/volcano (make real-volcano VOLCANO_TREE=DIR)")
	c := need(t)
	g := NewWithT(t)
	ctx := context.Background()
	goproxy := hostGoProxy(t, tree)

	ns := namespace(t, "e2e-volcano")
	releaseNS := privilegedNamespace(t, ns+"-system")
	allowClusterAdmin(t, ns, "deployer")
	env := localVolcano(t, ns, releaseNS, goproxy)
	key := client.ObjectKeyFromObject(env)
	deleteOnCleanup(t, env)
	t.Logf("load before: %s", loadAverage())
	pushDir(t, env, tree)

	start := time.Now()
	g.Expect(c.Client.Create(ctx, env)).To(Succeed())
	env = waitEnv(t, key, 120*time.Minute, false, readyNow)
	scheduler := imageOf(env, "volcanosh/vc-scheduler").Digest
	controllers := imageOf(env, "volcanosh/vc-controller-manager").Digest
	pod := waitPodLogging(t, poll.Wait{What: "a Ready Volcano scheduler pod of " + scheduler, Every: time.Second, Within: 10 * time.Minute},
		releaseNS, volcanoSchedulerLabels, "", imageByDigest(scheduler), "")
	cold := time.Since(start)
	t.Logf("first Ready, cold: scheduler pod %s on %s %s after the apply; load %s", pod, scheduler, cold.Round(time.Second), loadAverage())

	mark := editVolcanoScheduler(t, tree, 1)
	start = time.Now()
	push(t, env, tree)
	env = waitNewDigest(t, key, "volcanosh/vc-scheduler", scheduler)
	rebuilt := imageOf(env, "volcanosh/vc-scheduler")
	waitPodLogging(t, poll.Wait{What: "a Ready Volcano scheduler pod logging " + mark, Every: 200 * time.Millisecond, Within: 10 * time.Minute},
		releaseNS, volcanoSchedulerLabels, "", imageByDigest(rebuilt.Digest), mark)
	edit := time.Since(start)
	g.Expect(imageOf(env, "volcanosh/vc-controller-manager").Digest).To(Equal(controllers), "an edit of the scheduler builds only the scheduler anew")
	t.Logf("edit → new scheduler code logging %s (%s); load %s", edit.Round(100*time.Millisecond), rebuilt.UpdateReason, loadAverage())

	warm := warmVolcanoBuild(t, env, tree, goproxy)
	t.Logf("Volcano figures: first Ready cold %s, warm (second environment, first's cache, images only) %s; edit → new scheduler code %s; load %s",
		cold.Round(time.Second), warm.Round(time.Second), edit.Round(100*time.Millisecond), loadAverage())
}

// localVolcano is config/samples/volcano.yaml on the local cluster:
// sources and images under ns on the cluster's registry, the cluster's
// builder (with make and git) and busybox bases (nodes pull from no
// public registry), modules from the host (goproxy), the release in
// releaseNS, and the admission webhook off: its admission-init hook needs
// a base with a shell, openssl and kubectl (the project's Dockerfile adds
// them with apk), which this cluster has no image of. The suites are left
// out (they need kwok's chart from a public registry and a C compiler).
func localVolcano(t *testing.T, ns, releaseNS, goproxy string) *v1alpha1.DevEnvironment {
	t.Helper()
	g := NewWithT(t)
	env := readSample(t, "volcano.yaml")
	env.Namespace = ns
	env.Spec.ServiceAccountName = "deployer"
	env.Spec.Registry = &v1alpha1.RegistrySpec{Prefix: registry + "/" + ns, Insecure: true}
	env.Spec.Sources[0] = v1alpha1.Source{Name: env.Spec.Sources[0].Name,
		OCI: &v1alpha1.OCISource{Repository: registry + "/" + ns + "/src", Tag: "dev", Insecure: true}}
	env.Spec.Tests = nil
	vc := &env.Spec.Components[0]
	g.Expect(vc.Name).To(Equal("volcano"))
	g.Expect(vc.Images).To(HaveLen(3))
	for i := range vc.Images {
		img := &vc.Images[i]
		img.Base = busybox
		// The YAML anchor made the three share one run spec; each gets
		// its own copy of this cluster's.
		run := *img.Run
		run.Image = goImage
		run.Env = append(append([]v1alpha1.EnvVar{}, run.Env...), v1alpha1.EnvVar{Name: "GOPATH", Value: "/go"},
			v1alpha1.EnvVar{Name: "GOPROXY", Value: goproxy}, v1alpha1.EnvVar{Name: "GOSUMDB", Value: "off"},
			v1alpha1.EnvVar{Name: "GOTOOLCHAIN", Value: "local"})
		img.Run = &run
	}
	h := vc.Helm
	h.Namespace = releaseNS
	h.CreateNamespace = false
	var values map[string]any
	g.Expect(json.Unmarshal(h.Values.Raw, &values)).To(Succeed())
	custom, _ := values["custom"].(map[string]any)
	g.Expect(custom).NotTo(BeNil(), "the sample's custom values")
	custom["admission_enable"] = false
	raw, err := json.Marshal(values)
	g.Expect(err).NotTo(HaveOccurred())
	h.Values = &apiextensionsv1.JSON{Raw: raw}
	return env
}

// warmVolcanoBuild builds the same tree's three images in a second
// environment reading the first one's build cache (warmBuild). Only the
// images: a second release of Volcano's chart collides with the first
// (its CRD templates, its fixed-name webhooks, its scheduler).
func warmVolcanoBuild(t *testing.T, first *v1alpha1.DevEnvironment, tree, goproxy string) time.Duration {
	t.Helper()
	envB := localVolcano(t, namespace(t, "e2e-volcano-b"), "unused", goproxy)
	vc := envB.Spec.Components[0]
	vc.Helm = nil
	envB.Spec.Components = []v1alpha1.Component{vc}
	return warmBuild(t, first, envB, tree)
}

// editVolcanoScheduler adds a log line to the scheduler's main, after its
// flush daemon starts: new code that shows in the running scheduler's log.
func editVolcanoScheduler(t *testing.T, tree string, n int) string {
	t.Helper()
	mark := fmt.Sprintf("devloop edit %d", n)
	path := filepath.Join(tree, "cmd", "scheduler", "main.go")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const anchor = "klog.StartFlushDaemon(*logFlushFreq)\n"
	if !strings.Contains(string(data), anchor) {
		t.Fatalf("%s: no %q to add a line after", path, strings.TrimSpace(anchor))
	}
	edited := strings.Replace(string(data), anchor, anchor+fmt.Sprintf("\tklog.InfoS(%q)\n\tklog.Flush()\n", mark), 1)
	if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	return mark
}

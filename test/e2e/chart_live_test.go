//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	. "github.com/devloop-dev/devloop/test/builder"
	"github.com/devloop-dev/devloop/test/e2e/poll"
)

// vcsimCommands are the Volcano-shaped fixture's binaries
// (testdata/vcsim), by image name: the directory of each under cmd/.
var vcsimCommands = map[string]string{
	"vc-scheduler":          "scheduler",
	"vc-controller-manager": "controller-manager",
	"vc-webhook-manager":    "webhook-manager",
}

// schedulerLabels select the chart's scheduler pods.
var schedulerLabels = map[string]string{"app": "vc-scheduler"}

// vcsimSource copies the fixture's module (its Go tree, chart and init
// Job) to a directory of its own, which is both the module the binaries
// are built from and the source pushed (bin/ holds the binaries).
func vcsimSource(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "vcsim"))); err != nil {
		t.Fatal(err)
	}
	return dir
}

// buildVcsim compiles image's binary into dir/bin/<image> for the node
// (static, linux/amd64), as a developer's local go build would; the
// module's dependencies come from this machine's module cache.
func buildVcsim(t *testing.T, dir, image string) {
	t.Helper()
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", filepath.Join(dir, "bin", image), "./cmd/"+vcsimCommands[image])
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64", "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod -buildvcs=false", "GOPROXY=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", image, err, out)
	}
}

var versionLine = regexp.MustCompile(`const version = "[^"]*"`)

// editScheduler sets the scheduler's version string, the edit a test
// makes to see new code serving.
func editScheduler(t *testing.T, dir, version string) {
	t.Helper()
	path := filepath.Join(dir, "cmd", "scheduler", "main.go")
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !versionLine.Match(src) {
		t.Fatalf("%s has no version constant", path)
	}
	if err := os.WriteFile(path, versionLine.ReplaceAll(src, []byte(`const version = "`+version+`"`)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// vcsimEnv is config/samples/vcsim-chart.yaml's shape with binaries built
// on this machine: the three images (each scoped to its binary, each
// live-updatable) in one component, an init Job after them, and the chart
// receiving the three images through helm.imageValues after that.
func vcsimEnv(ns string) *v1alpha1.DevEnvironment {
	image := func(name string) v1alpha1.ImageSpec {
		return Image(name, Program("bin/"+name, "/"+name), Paths("bin/"+name), LiveUpdate("/"+name))
	}
	return newEnv(ns, "vcsim").Registry().Components(
		Component("images", Images(image("vc-scheduler"), image("vc-controller-manager"), image("vc-webhook-manager"))),
		Component("init", Manifests("init"), DependsOn("images")),
		Component("vcsim", DependsOn("init"), Chart("chart", func(h *v1alpha1.HelmSpec) {
			h.ReleaseName = "vcsim"
			h.Values = &apiextensionsv1.JSON{Raw: []byte(`{"custom":{"schedulerLogLevel":"3"}}`)}
			h.ImageValues = []v1alpha1.ImageValue{
				{Image: "vc-scheduler", Path: "images.scheduler", From: "Reference"},
				{Image: "vc-controller-manager", Path: "images.controllerManager", From: "Reference"},
				{Image: "vc-webhook-manager", Path: "images.webhookManager", From: "Reference"},
			}
		})),
	).Build()
}

// TestChartImageLiveUpdatedInPlace is issue 33 on the real cluster: the
// Volcano-shaped fixture's scheduler, an image its chart receives
// through helm.imageValues, edited (its version string) and rebuilt is
// serving in place through its Service with no Helm upgrade (the
// release's revision unchanged), no new ReplicaSet and no new pod; a
// values change in the same environment then rolls out (an upgrade,
// hook included). Change to serving is printed for live updates and,
// once liveUpdate is taken off the scheduler, for rollouts.
func TestChartImageLiveUpdatedInPlace(t *testing.T) {
	longCase(t)
	c := need(t)
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t, "e2e-vcsim")
	dir := vcsimSource(t)
	// The local builds below run with GOPROXY=off, as offline as a
	// developer's warm machine: the module cache gets the fixture's
	// dependencies first (CI's first run on an empty cache failed here).
	downloadModules(t, dir)
	started := time.Now()
	for image := range vcsimCommands {
		buildVcsim(t, dir, image)
	}
	t.Logf("three binaries built on this machine in %s", time.Since(started).Round(time.Millisecond))
	env := vcsimEnv(ns)
	pushOnly(t, env, dir)
	g.Expect(c.Client.Create(ctx, env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)
	env = waitEnv(t, key, 6*time.Minute, false, readyNow)
	t.Logf("chart, hook and init Job Ready %s after the first push", time.Since(started).Round(time.Millisecond))
	url := serviceURL(t, ns, "vc-scheduler")
	waitAnswer(t, poll.Wait{What: "the scheduler serves v1 through its Service", Every: 20 * time.Millisecond, Within: 2 * time.Minute},
		get(url), is("vc-scheduler v1\n"))
	revision := componentOf(env, "vcsim").Release.Revision
	g.Expect(storedRevision(g, ns, "vcsim")).To(Equal(revision), "Helm's storage and status agree")
	rsBefore := replicaSets(g, ns)
	podsBefore := schedulerPods(g, ns)
	g.Expect(podsBefore).To(HaveLen(1))
	d := &appsv1.Deployment{}
	g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vc-scheduler"}, d)).To(Succeed())
	generation := d.Generation
	g.Expect(d.Spec.Template.Labels).To(HaveKeyWithValue(v1alpha1.LabelLiveUpdate, v1alpha1.LiveUpdateSupervised))

	// Binary-only edits of the scheduler: served in place.
	live := editsToServing(t, env, dir, 2, 4, func(g Gomega, env *v1alpha1.DevEnvironment) {
		ist := imageOf(env, "vc-scheduler")
		g.Expect(ist.LastUpdate).To(Equal(v1alpha1.UpdateLive), "update reason: %s", ist.UpdateReason)
		g.Expect(ist.LiveDigest).To(Equal(ist.Digest))
	})
	env = waitEnv(t, key, time.Minute, false, readyNow)
	g.Expect(componentOf(env, "vcsim").Release.Revision).To(Equal(revision), "no Helm upgrade")
	// Helm's own storage, not only status: an action that went on
	// outside a reconcile could have stored a revision status never saw.
	g.Expect(storedRevision(g, ns, "vcsim")).To(Equal(revision), "no Helm upgrade stored")
	g.Expect(replicaSets(g, ns)).To(Equal(rsBefore), "no new ReplicaSet")
	g.Expect(schedulerPods(g, ns)).To(ConsistOf(podsBefore), "no new pod")
	g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vc-scheduler"}, d)).To(Succeed())
	g.Expect(d.Generation).To(Equal(generation), "the Deployment was not changed")

	// A values change: an upgrade, bringing the newest build with it.
	start := time.Now()
	setValues(t, key, `{"custom":{"schedulerLogLevel":"5"}}`)
	env = waitEnv(t, key, 4*time.Minute, false, func(g Gomega, env *v1alpha1.DevEnvironment) {
		readyNow(g, env)
		g.Expect(componentOf(env, "vcsim").Release.Revision).To(Equal(revision + 1))
		ist := imageOf(env, "vc-scheduler")
		g.Expect(ist.LastUpdate).To(Equal(v1alpha1.UpdateRollout))
		g.Expect(ist.TemplateDigest).To(Equal(ist.Digest))
	})
	waitPods(t, poll.Wait{What: "one scheduler pod of the upgraded template, Ready", Every: 100 * time.Millisecond, Within: 2 * time.Minute},
		ns, schedulerLabels, func(g Gomega, pods []corev1.Pod) {
			pods = poll.Live(pods)
			g.Expect(pods).To(HaveLen(1))
			g.Expect(pods[0].Name).NotTo(BeElementOf(podsBefore))
			g.Expect(poll.IsReady(&pods[0])).To(BeTrue())
			g.Expect(pods[0].Spec.Containers[0].Env).To(ContainElement(corev1.EnvVar{Name: "LOG_LEVEL", Value: "5"}))
		})
	waitAnswer(t, poll.Wait{What: "the upgraded scheduler serves the newest build", Every: 20 * time.Millisecond, Within: time.Minute},
		get(url), is("vc-scheduler v4\n"))
	t.Logf("values change rolled out in %s (%s)", time.Since(start).Round(time.Millisecond), imageOf(env, "vc-scheduler").UpdateReason)
	g.Expect(len(replicaSets(g, ns))).To(BeNumerically(">", len(rsBefore)), "a new ReplicaSet")
	g.Expect(storedRevision(g, ns, "vcsim")).To(Equal(revision+1), "one upgrade stored, none back to the older digest")

	// The same edits as rollouts, for the figures: liveUpdate taken off
	// the scheduler.
	cur := &v1alpha1.DevEnvironment{}
	g.Expect(c.Client.Get(ctx, key, cur)).To(Succeed())
	patched := cur.DeepCopy()
	patched.Spec.Components[0].Images[0].LiveUpdate = nil
	g.Expect(c.Client.Patch(ctx, patched, client.MergeFrom(cur))).To(Succeed())
	waitEnv(t, key, 4*time.Minute, false, func(g Gomega, env *v1alpha1.DevEnvironment) {
		readyNow(g, env)
		g.Expect(componentOf(env, "vcsim").Release.Revision).To(BeNumerically(">", revision+1))
	})
	rollout := editsToServing(t, env, dir, 5, 7, func(g Gomega, env *v1alpha1.DevEnvironment) {
		d := &appsv1.Deployment{}
		g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vc-scheduler"}, d)).To(Succeed())
		g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(HaveSuffix("@"+imageOf(env, "vc-scheduler").Digest), "rolled out")
	})

	lp50, lp90 := percentiles(live)
	rp50, rp90 := percentiles(rollout)
	load, _ := os.ReadFile("/proc/loadavg")
	t.Logf("vcsim scheduler, edit → serving through its Service (local go build included): live update p50 %s p90 %s (%v); rollout (Helm upgrade, hook Job, new pod) p50 %s p90 %s (%v); load %s",
		lp50.Round(time.Millisecond), lp90.Round(time.Millisecond), live, rp50.Round(time.Millisecond), rp90.Round(time.Millisecond), rollout, load)
}

// editsToServing edits the scheduler to versions from..to, each built and
// pushed, and returns how long each took from the edit until its Service
// answered with the new version; status is checked with check.
func editsToServing(t *testing.T, env *v1alpha1.DevEnvironment, dir string, from, to int, check func(Gomega, *v1alpha1.DevEnvironment)) []time.Duration {
	t.Helper()
	url := serviceURL(t, env.Namespace, "vc-scheduler")
	var took []time.Duration
	for v := from; v <= to; v++ {
		version := fmt.Sprintf("v%d", v)
		start := time.Now()
		editScheduler(t, dir, version)
		buildVcsim(t, dir, "vc-scheduler")
		built := time.Since(start)
		request := push(t, env, dir)
		_, served := waitAnswer(t, poll.Wait{What: "the scheduler serves " + version + " through its Service", Every: 20 * time.Millisecond,
			Within: 3 * time.Minute, Since: start}, get(url), is("vc-scheduler "+version+"\n"))
		took = append(took, served)
		cur := waitEnv(t, client.ObjectKeyFromObject(env), 2*time.Minute, false, func(g Gomega, env *v1alpha1.DevEnvironment) {
			g.Expect(env.Status.LastHandledReconcileAt).To(Equal(request))
			check(g, env)
		})
		t.Logf("scheduler %s serving %s after the edit (build %s): %s, %s", version, served.Round(time.Millisecond),
			built.Round(time.Millisecond), imageOf(cur, "vc-scheduler").LastUpdate, imageOf(cur, "vc-scheduler").UpdateReason)
	}
	return took
}

// schedulerPods names the scheduler's pods not being deleted.
func schedulerPods(g Gomega, ns string) []string {
	pods := &corev1.PodList{}
	g.Expect(dc.Client.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels(schedulerLabels))).To(Succeed())
	var names []string
	for _, p := range poll.Live(pods.Items) {
		names = append(names, p.Name)
	}
	return names
}

// storedRevision is the release's highest revision in Helm's storage
// (its Secrets, labelled owner=helm and name=release).
func storedRevision(g Gomega, ns, release string) int {
	secrets := &corev1.SecretList{}
	g.Expect(dc.Client.List(context.Background(), secrets, client.InNamespace(ns), client.MatchingLabels{"owner": "helm", "name": release})).To(Succeed())
	highest := 0
	for _, s := range secrets.Items {
		v, err := strconv.Atoi(s.Labels["version"])
		g.Expect(err).NotTo(HaveOccurred(), "secret %s", s.Name)
		highest = max(highest, v)
	}
	return highest
}

// setValues replaces the chart component's values.
func setValues(t *testing.T, key client.ObjectKey, values string) {
	t.Helper()
	g := NewWithT(t)
	cur := &v1alpha1.DevEnvironment{}
	g.Expect(dc.Client.Get(context.Background(), key, cur)).To(Succeed())
	patched := cur.DeepCopy()
	patched.Spec.Components[2].Helm.Values = &apiextensionsv1.JSON{Raw: []byte(values)}
	g.Expect(dc.Client.Patch(context.Background(), patched, client.MergeFrom(cur))).To(Succeed())
}

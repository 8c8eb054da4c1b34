package build_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/internal/image"
	"github.com/devloop-dev/devloop/internal/testrun"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// volcanoImages are the three images of volcanoTree.
var volcanoImages = []string{"volcanosh/vc-scheduler", "volcanosh/vc-controller-manager", "volcanosh/vc-webhook-manager"}

// volcanoEnv is Volcano's shape: three images from one source and one run
// spec with a cache (as config/samples/volcano.yaml writes it), the last
// image asking for a larger cache, and a unit-test suite with a cache
// in the same builder image on the same source.
func volcanoEnv(ns string, keepWarm bool) *v1alpha1.DevEnvironment {
	size := resource.MustParse("1Gi")
	run := v1alpha1.BuildRun{Image: "golang:1.25", Command: []string{"make", "{{ .ImageBase }}"},
		Cache: &v1alpha1.BuildCache{Size: &size}, KeepWarm: keepWarm}
	volcano := v1alpha1.Component{Name: "volcano"}
	for _, img := range volcanoImages {
		base := img[len("volcanosh/"):]
		volcano.Images = append(volcano.Images, v1alpha1.ImageSpec{
			Name: img, Source: "volcano", Run: run.DeepCopy(), Platforms: []string{"linux/amd64"},
			Layers:     []v1alpha1.LayerMapping{{From: "_output/bin/" + base, To: "/" + base, Mode: "0755"}},
			Entrypoint: []string{"/" + base},
		})
	}
	larger := resource.MustParse("2Gi")
	volcano.Images[2].Run.Cache.Size = &larger
	unit := v1alpha1.TestSuite{Name: "unit", Source: "volcano", Image: v1alpha1.TestImage{Ref: "golang:1.25"},
		Command: []string{"make", "unit-test"}, Cache: &v1alpha1.TestCache{}}
	return operatortest.Env(ns, "volcano").Registry().PushedSource("volcano", "src").ServiceAccount(operatortest.Deployer).Components(volcano).Tests(unit).Obj()
}

// claimsOf are the PersistentVolumeClaims a pod spec mounts.
func claimsOf(spec corev1.PodSpec) []string {
	var out []string
	for _, v := range spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			out = append(out, v.PersistentVolumeClaim.ClaimName)
		}
	}
	return out
}

// TestImagesOfOneTreeShareOneCacheAndTakeTurns (issue 34 items 1 and 3):
// Volcano's three images, one source and one builder image, mount ONE
// build cache claim (sized by the largest ask) and their builder Jobs run
// one after the other: while one runs, the others wait, saying for whom;
// each starts only after the one before it ended. The unit-test suite,
// in the same image on the same source, mounts the same claim at the
// builders' paths, so its first run finds what they compiled.
func TestImagesOfOneTreeShareOneCacheAndTakeTurns(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := operatortest.Namespace(t)
	operatortest.CreateDeployer(t, ns, operatortest.Deployer)
	operatortest.AppFiles(t, ns, volcanoTree(ns))
	env := volcanoEnv(ns, false)
	claim := build.CacheClaimName(env, volcanoImages[0])
	for _, img := range volcanoImages {
		g.Expect(build.CacheClaimName(env, img)).To(Equal(claim), img)
	}
	key := operatortest.CreateEnv(t, env)

	type span struct{ start, end time.Time }
	var spans []span
	var seen []string
	for turn := range volcanoImages {
		// One Job in the lane; the images after it wait, naming it.
		var job batchv1.Job
		operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
			jobs := buildJobsByImage(g, ns, volcanoImages...)
			var running []batchv1.Job
			for _, j := range jobs {
				if !jobDone(j) {
					running = append(running, j)
				}
			}
			g.Expect(running).To(HaveLen(1), "one builder Job of the claim at a time")
			job = running[0]
			g.Expect(seen).NotTo(ContainElement(job.Name))
			if turn < len(volcanoImages)-1 {
				g.Expect(env.Status.Components).NotTo(BeEmpty())
				g.Expect(env.Status.Components[0].Message).To(ContainSubstring("waits for builder job " + job.Name))
			}
		})
		seen = append(seen, job.Name)
		g.Expect(claimsOf(job.Spec.Template.Spec)).To(Equal([]string{claim}), job.Name)
		g.Expect(job.Labels).To(HaveKeyWithValue(build.LabelBuildCache, claim))
		start := job.CreationTimestamp.Time
		img := job.Labels[v1alpha1.LabelImage]
		for _, name := range volcanoImages {
			if v1alpha1.LabelValue(name) == img {
				img = name
			}
		}
		finishBuild(t, ns, img, job)
		spans = append(spans, span{start, time.Now()})
	}
	env = operatortest.WaitForEnv(t, key, operatortest.ExpectReadyAndCurrent)
	for i, s := range spans {
		t.Logf("builder job %s: created %s, ended %s", seen[i], s.start.Format(time.RFC3339), s.end.Format(time.RFC3339Nano))
		if i > 0 {
			// Creation times are kept to the second.
			g.Expect(s.start.Before(spans[i-1].end.Truncate(time.Second))).To(BeFalse(), "job %s started before %s ended", seen[i], seen[i-1])
		}
	}
	pvcs := &corev1.PersistentVolumeClaimList{}
	g.Expect(operatortest.Admin.List(ctx, pvcs, client.InNamespace(ns))).To(Succeed())
	g.Expect(pvcs.Items).To(HaveLen(1), "one claim for the three images")
	g.Expect(pvcs.Items[0].Name).To(Equal(claim))
	g.Expect(pvcs.Items[0].Spec.Resources.Requests.Storage().String()).To(Equal("2Gi"), "the largest ask")

	// The suite's run mounts the same claim as the builders do.
	operatortest.Annotate(t, env, v1alpha1.TriggerAnnotation, "unit")
	var testJob batchv1.Job
	g.Eventually(func(g Gomega) {
		jobs := &batchv1.JobList{}
		g.Expect(operatortest.Admin.List(ctx, jobs, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelRole: v1alpha1.RoleTest})).To(Succeed())
		g.Expect(jobs.Items).To(HaveLen(1))
		testJob = jobs.Items[0]
	}, operatortest.Timeout).Should(Succeed())
	g.Expect(claimsOf(testJob.Spec.Template.Spec)).To(Equal([]string{claim}))
	var test corev1.Container
	for _, c := range testJob.Spec.Template.Spec.Containers {
		if c.Name == testrun.ContainerTest {
			test = c
		}
	}
	builderMounts := buildContainer(buildJobsByImage(g, ns, volcanoImages[0])[volcanoImages[0]]).VolumeMounts
	for _, m := range builderMounts {
		if m.Name == "cache" {
			g.Expect(test.VolumeMounts).To(ContainElement(HaveField("MountPath", m.MountPath)), "the suite mounts %s like the builders", m.MountPath)
			g.Expect(test.VolumeMounts).To(ContainElement(HaveField("SubPath", m.SubPath)))
		}
	}
	g.Expect(pvcs.Items).To(HaveLen(1))
	g.Expect(operatortest.Admin.List(ctx, pvcs, client.InNamespace(ns))).To(Succeed())
	g.Expect(pvcs.Items).To(HaveLen(1), "the suite made no test cache claim of its own")
}

// jobDone is a Job with a terminal condition.
func jobDone(job batchv1.Job) bool {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// TestWarmBuildersOfOneTreeTakeTurns (issue 34 item 1): with
// run.keepWarm, Volcano's three warm builders mount the one claim and
// their builds take turns: while the first compiles, no other build's
// command runs and the others wait, saying so; the run steps recorded
// never overlap.
func TestWarmBuildersOfOneTreeTakeTurns(t *testing.T) {
	g := NewWithT(t)
	ns := operatortest.Namespace(t)
	operatortest.CreateDeployer(t, ns, operatortest.Deployer)
	operatortest.AppFiles(t, ns, volcanoTree(ns))
	env := volcanoEnv(ns, true)
	claim := build.CacheClaimName(env, volcanoImages[0])

	type span struct{ start, end time.Time }
	var mu sync.Mutex
	var spans []span
	hold := make(chan struct{})
	operatortest.WarmExec.Answer(func(command []string, stdout, stderr io.Writer) error {
		switch {
		case operatortest.IsStep(command, build.WarmStepRun):
			mu.Lock()
			i := len(spans)
			spans = append(spans, span{start: time.Now()})
			mu.Unlock()
			if i == 0 {
				<-hold // the first compile lasts until the test saw the others wait
			} else {
				time.Sleep(200 * time.Millisecond) // long enough to overlap the next one if they did not take turns
			}
			mu.Lock()
			spans[i].end = time.Now()
			mu.Unlock()
		case operatortest.IsStep(command, build.WarmStepPush):
			var spec image.Spec
			for i := range command[:len(command)-1] {
				if command[i] == "--image" {
					g.Expect(json.Unmarshal([]byte(command[i+1]), &spec)).To(Succeed())
				}
			}
			report, _ := json.Marshal(build.AssembleReport{Digest: pushRandom(g, ns+"/"+spec.Name).String(), Uploaded: 1})
			_, err := fmt.Fprintf(stdout, "%s\n", report)
			return err
		}
		return nil
	})
	key := operatortest.CreateEnv(t, env)
	for _, img := range volcanoImages {
		pod := operatortest.RunPod(t, ns, build.WarmPodName(env.Name, img, "linux/amd64"))
		g.Expect(claimsOf(pod.Spec)).To(Equal([]string{claim}), img)
	}
	operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.Components).NotTo(BeEmpty())
		g.Expect(env.Status.Components[0].Message).To(ContainSubstring("shares build cache claim " + claim + ": one compile at a time"))
		mu.Lock()
		defer mu.Unlock()
		g.Expect(spans).To(HaveLen(1), "one build command runs")
	})
	close(hold)
	operatortest.WaitForEnv(t, key, operatortest.ExpectReadyAndCurrent)
	mu.Lock()
	defer mu.Unlock()
	g.Expect(spans).To(HaveLen(3))
	for i, s := range spans {
		t.Logf("run step %d: %s to %s", i, s.start.Format(time.RFC3339Nano), s.end.Format(time.RFC3339Nano))
		if i > 0 {
			g.Expect(s.start.Before(spans[i-1].end)).To(BeFalse(), "run step %d started before %d ended", i, i-1)
		}
	}
}

// TestUnusedCacheClaimIsRemoved: a new run.image keys a new shared claim;
// the claim the old one keyed, which nothing mounts any more, is deleted
// rather than left holding its storage until the environment goes.
func TestUnusedCacheClaimIsRemoved(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, _ := apiNamespace(t)
	env := amd64APIEnv(ns)
	old := build.CacheClaimName(env, "api")
	key := operatortest.CreateEnv(t, env)
	g.Eventually(func() error {
		return operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: old}, &corev1.PersistentVolumeClaim{})
	}, operatortest.Timeout).Should(Succeed())

	operatortest.EditSpec(t, key, func(cur *v1alpha1.DevEnvironment) {
		cur.Spec.Components[0].Images[0].Run.Image = "golang:1.26"
		env = cur
	})
	renewed := build.CacheClaimName(env, "api")
	g.Expect(renewed).NotTo(Equal(old))
	g.Eventually(func(g Gomega) {
		pvcs := &corev1.PersistentVolumeClaimList{}
		g.Expect(operatortest.Admin.List(ctx, pvcs, client.InNamespace(ns))).To(Succeed())
		var names []string
		for _, p := range pvcs.Items {
			if p.DeletionTimestamp == nil {
				names = append(names, p.Name)
			}
		}
		g.Expect(names).To(ConsistOf(renewed))
	}, operatortest.Timeout).Should(Succeed())
}

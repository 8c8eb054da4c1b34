//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/internal/devcluster"
	. "github.com/devloop-dev/devloop/test/builder"
	. "github.com/devloop-dev/devloop/test/e2e/fixture"
	"github.com/devloop-dev/devloop/test/e2e/poll"
)

// The suite's operator with its work directory on a claim either node
// attaches (workDir.persistence, class local-shared); the default install
// again when the test ends.
func operatorOnSharedClaim(t *testing.T, c *devcluster.Cluster) {
	t.Helper()
	ctx := context.Background()
	if err := c.Client.Get(ctx, client.ObjectKey{Name: sharedClass}, &storagev1.StorageClass{}); err != nil {
		t.Skipf("no StorageClass %s (hack/cluster/node2.sh makes it): %v", sharedClass, err)
	}
	operatorForTheCase(t, c, map[string]any{
		"workDir": map[string]any{"sizeLimit": "6Gi", "persistence": map[string]any{"enabled": true, "size": "6Gi", "storageClass": sharedClass}},
	})
}

// operatorForTheCase installs the operator with these chart values for
// the case, and back with the suite's once it ends.
func operatorForTheCase(t *testing.T, c *devcluster.Cluster, values map[string]any) {
	t.Helper()
	NewWithT(t).Expect(c.InstallOperatorWith(context.Background(), operatorImage, values)).To(Succeed())
	t.Cleanup(func() {
		if err := c.InstallOperator(context.Background(), operatorImage); err != nil {
			t.Logf("installing the operator back with the suite's values: %v", err)
		}
	})
}

// operatorPod is the running operator pod.
func operatorPod(t *testing.T, c *devcluster.Cluster, not string) corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	waitCheck(t, poll.Wait{What: "the operator pod Ready", Every: 300 * time.Millisecond, Within: 4 * time.Minute}, func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(c.Client.List(context.Background(), pods, client.InNamespace(devcluster.OperatorNamespace),
			client.MatchingLabels{"app.kubernetes.io/component": "manager"})).To(Succeed())
		ready := poll.Ready(poll.Live(pods.Items))
		g.Expect(ready).To(HaveLen(1), poll.DescribePods(pods.Items))
		g.Expect(ready[0].Name).NotTo(Equal(not), "still the old pod")
		pod = ready[0]
	})
	return pod
}

// moveOperator cordons the operator's node and deletes its pod (grace 0
// when kill): the Deployment's next pod runs on another node. The node is
// uncordoned once that pod is Ready: kept cordoned, it would strand every
// later build whose cache claim's volume is that node's disk (the default
// class's are node 1's), which is not what the move tests. It returns the
// new pod.
func moveOperator(t *testing.T, c *devcluster.Cluster, kill bool) corev1.Pod {
	t.Helper()
	ctx := context.Background()
	old := operatorPod(t, c, "")
	kubectl(t, c, "cordon", old.Spec.NodeName)
	t.Cleanup(func() { uncordon(t, c, old.Spec.NodeName) })
	defer uncordon(t, c, old.Spec.NodeName)
	opts := []client.DeleteOption{}
	if kill {
		opts = append(opts, client.GracePeriodSeconds(0))
	}
	start := time.Now()
	NewWithT(t).Expect(c.Client.Delete(ctx, &old, opts...)).To(Succeed())
	next := operatorPod(t, c, old.Name)
	NewWithT(t).Expect(next.Spec.NodeName).NotTo(Equal(old.Spec.NodeName))
	t.Logf("operator %s on %s deleted (kill %v): %s Ready on %s after %s", old.Name, old.Spec.NodeName, kill,
		next.Name, next.Spec.NodeName, time.Since(start).Round(100*time.Millisecond))
	return next
}

func kubectl(t *testing.T, c *devcluster.Cluster, args ...string) {
	t.Helper()
	out, err := exec.Command(kubectlPath(), append([]string{"--kubeconfig", c.Kubeconfig}, args...)...).CombinedOutput()
	if err != nil {
		t.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// grantReadCache lets readerNS's deployer read the build cache of
// nsA/name.
func grantReadCache(t *testing.T, c *devcluster.Cluster, nsA, name, readerNS string) {
	t.Helper()
	ctx := context.Background()
	role := "read-" + name + "-" + readerNS
	NewWithT(t).Expect(c.Client.Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: role},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"devenvironments"},
			ResourceNames: []string{name}, Verbs: []string{"readcache"}}},
	})).To(Succeed())
	NewWithT(t).Expect(c.Client.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: role},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: readerNS, Name: "deployer"}},
	})).To(Succeed())
}

// helloBuild is a Go program's image compiled by a builder Job with a
// cache claim, so its go command uses the team cache. Its paths make the
// operator fetch the source into its store (it hashes the selected files),
// which a builder Job alone would not: the store then has something to
// keep across the move.
func helloBuild() v1alpha1.ImageSpec {
	run := GoBuild(goImage, []string{"go", "build", "-o", "out/hello", "."}, GoPath)
	run.Cache = &v1alpha1.BuildCache{}
	return Image("hello", Base(busybox), Run(run), Program("out/hello", "/hello"), Paths("go.mod", "main.go"))
}

// readerBuilds builds the hello program in a new namespace whose
// environment reads nsA/hello's cache; it returns the team cache hits of
// its builder Job.
func readerBuilds(t *testing.T, c *devcluster.Cluster, nsA, prefix string, files Files) int {
	t.Helper()
	ns := namespace(t, prefix)
	grantReadCache(t, c, nsA, "hello", ns)
	env := newEnv(ns, "hello").Registry().Components(Component("hello", Images(helloBuild()))).Build()
	env.Spec.Cache = &v1alpha1.EnvironmentCache{ReadFrom: []v1alpha1.CacheSource{{Namespace: nsA, Name: "hello"}}}
	pushDir(t, env, sourceDir(t, files))
	NewWithT(t).Expect(c.Client.Create(context.Background(), env)).To(Succeed())
	done := waitEnv(t, client.ObjectKeyFromObject(env), 6*time.Minute, false, func(g Gomega, env *v1alpha1.DevEnvironment) {
		readyNow(g, env)
		g.Expect(imageOf(env, "hello").Digest).NotTo(BeEmpty())
	})
	return teamCacheHits(t, ns, imageOf(done, "hello").Build.Job)
}

// storeEntries is the names under the work volume's dir.
func storeEntries(t *testing.T, volume, dir string) []string {
	t.Helper()
	var names []string
	_ = filepath.WalkDir(filepath.Join(volume, dir), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names = append(names, strings.TrimPrefix(p, volume))
		}
		return nil
	})
	return names
}

// TestMultiNodeTeamCacheSurvivesTheOperatorMove (issue 45, "Must show"):
// the suite's operator on a work claim either node attaches; environment
// A compiles a Go program, B (another namespace, reading A's cache)
// compiles it with team cache hits; the operator's node is cordoned and
// its pod deleted, so it starts on the other node; C (a third namespace)
// compiles it again with hits read from the moved operator, and the source
// store still holds what it held.
func TestMultiNodeTeamCacheSurvivesTheOperatorMove(t *testing.T) {
	c := need(t)
	twoNodes(t, c)
	operatorOnSharedClaim(t, c)
	ctx := context.Background()
	files := helloSource(helloMain)
	nsA := namespace(t, "e2e-opmove-a")
	envA := newEnv(nsA, "hello").Registry().Components(Component("hello", Images(helloBuild()))).Build()
	pushDir(t, envA, sourceDir(t, files))
	NewWithT(t).Expect(c.Client.Create(ctx, envA)).To(Succeed())
	waitEnv(t, client.ObjectKeyFromObject(envA), 6*time.Minute, false, func(g Gomega, env *v1alpha1.DevEnvironment) { readyNow(g, env) })

	before := readerBuilds(t, c, nsA, "e2e-opmove-b", files)
	volume := boundVolume(t, c, devcluster.OperatorNamespace, devcluster.OperatorRelease+"-work")
	sources := storeEntries(t, volume, "sources")
	cached := storeEntries(t, volume, "build-cache")
	t.Logf("before the move: B's builder read %d entries from the team cache; store %s: %d source files, %d cache files", before, volume, len(sources), len(cached))
	NewWithT(t).Expect(before).To(BeNumerically(">", 0), "B read nothing from the team cache before the move")
	NewWithT(t).Expect(sources).NotTo(BeEmpty(), "the operator's source store under %s holds nothing before the move: nothing to show it keeps", volume)

	moveOperator(t, c, false)
	after := readerBuilds(t, c, nsA, "e2e-opmove-c", files)
	t.Logf("after the move: C's builder read %d entries from the team cache", after)
	NewWithT(t).Expect(after).To(BeNumerically(">", 0), "C read nothing from the team cache after the operator moved")
	NewWithT(t).Expect(storeEntries(t, volume, "sources")).To(ContainElements(sources), "the source store after the move")
}

// TestMultiNodeOperatorKilledMidWork (issue 45, "Operator moves
// mid-work"): the operator's node cordoned and its pod killed (grace 0)
// while a builder Job builds, while a warm builder builds and while a
// test run runs: the new operator, on the other node, finishes each
// exactly once: the same builder Job (never replaced), one run for one
// trigger, its one Job.
func TestMultiNodeOperatorKilledMidWork(t *testing.T) {
	c := need(t)
	twoNodes(t, c)
	ctx := context.Background()
	ns := namespace(t, "e2e-opkill")
	dir := sourceDir(t, Files{"bin/app": "#!/bin/sh\necho app\n",
		"deploy/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: tested}\ndata: {a: b}\n"})
	pushDir(t, newEnv(ns, "source").Build(), dir)
	slowBuild := func(seconds string) *v1alpha1.BuildRun {
		return &v1alpha1.BuildRun{Image: busybox, Command: []string{"sh", "-c",
			"sleep " + seconds + " && mkdir -p out && cp bin/app out/app"}}
	}

	t.Run("builder job", func(t *testing.T) {
		env := newEnv(ns, "job").Registry().Components(Component("app", Images(Image("app", Run(slowBuild("25")), Program("out/app", "/app"))))).Build()
		NewWithT(t).Expect(c.Client.Create(ctx, env)).To(Succeed())
		pod := waitBuilderRunning(t, ns, "job", false)
		jobName := pod.Labels["job-name"]
		job := &batchv1.Job{}
		NewWithT(t).Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: jobName}, job)).To(Succeed())
		moveOperator(t, c, true)
		done := waitEnv(t, client.ObjectKeyFromObject(env), 5*time.Minute, false, func(g Gomega, env *v1alpha1.DevEnvironment) {
			readyNow(g, env)
		})
		NewWithT(t).Expect(imageOf(done, "app").Build.Job).To(Equal(jobName))
		same := &batchv1.Job{}
		NewWithT(t).Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: jobName}, same)).To(Succeed())
		NewWithT(t).Expect(same.UID).To(Equal(job.UID), "the builder Job was replaced: its build ran again")
		NewWithT(t).Expect(same.Status.Succeeded).To(BeEquivalentTo(1))
		t.Logf("builder job %s finished by the new operator, once; status: %s", jobName, conditionMessages(done))
	})

	t.Run("warm build", func(t *testing.T) {
		// Each run of the build command leaves a line on its cache
		// claim: the build's count, whichever operator sent it.
		run := &v1alpha1.BuildRun{Image: busybox, Command: []string{"sh", "-c",
			"echo run >> /tmp/cache/runs && sleep 25 && mkdir -p out && cp bin/app out/app"}}
		run.Cache = &v1alpha1.BuildCache{Paths: []string{"/tmp/cache"}}
		run.KeepWarm = true
		env := newEnv(ns, "warm").Registry().Components(Component("app", Images(Image("app", Run(run), Program("out/app", "/app"))))).Build()
		NewWithT(t).Expect(c.Client.Create(ctx, env)).To(Succeed())
		pod := waitBuilderRunning(t, ns, "warm", true)
		moveOperator(t, c, true)
		done := waitEnv(t, client.ObjectKeyFromObject(env), 5*time.Minute, false, func(g Gomega, env *v1alpha1.DevEnvironment) {
			readyNow(g, env)
		})
		still := &corev1.Pod{}
		NewWithT(t).Expect(c.Client.Get(ctx, client.ObjectKeyFromObject(&pod), still)).To(Succeed())
		NewWithT(t).Expect(still.UID).To(Equal(pod.UID), "the warm builder was replaced")
		// The claim's volume holds each cache path in a directory of its own.
		found, _ := filepath.Glob(filepath.Join(boundVolume(t, c, ns, build.CacheClaimName(env, "app")), "*", "runs"))
		NewWithT(t).Expect(found).To(HaveLen(1), "the build's runs file on its cache claim")
		runs, err := os.ReadFile(found[0])
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		NewWithT(t).Expect(strings.Count(string(runs), "run\n")).To(Equal(1), "the build command ran more than once for one input")
		t.Logf("warm build finished by the new operator in the same pod %s; status: %s", pod.Name, conditionMessages(done))
	})

	t.Run("test run", func(t *testing.T) {
		suite := v1alpha1.TestSuite{Name: "slow", Source: AppSource, Image: v1alpha1.TestImage{Ref: busybox},
			Command: []string{"sh", "-c", "sleep 25 && echo passed"}}
		env := newEnv(ns, "tests").Components(Component("app", Manifests("deploy"))).Tests(suite).Build()
		NewWithT(t).Expect(c.Client.Create(ctx, env)).To(Succeed())
		key := client.ObjectKeyFromObject(env)
		waitEnv(t, key, 3*time.Minute, false, func(g Gomega, env *v1alpha1.DevEnvironment) { readyNow(g, env) })
		cur := &v1alpha1.DevEnvironment{}
		NewWithT(t).Expect(c.Client.Get(ctx, key, cur)).To(Succeed())
		patch := client.MergeFrom(cur.DeepCopy())
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Annotations[v1alpha1.TriggerAnnotation] = "slow"
		NewWithT(t).Expect(c.Client.Patch(ctx, cur, patch)).To(Succeed())
		waitPods(t, poll.Wait{What: "the test run's pod running", Every: 200 * time.Millisecond, Within: 3 * time.Minute}, ns, nil,
			func(g Gomega, pods []corev1.Pod) {
				var running []string
				for _, p := range poll.Live(pods) {
					if p.Labels[v1alpha1.LabelRole] == v1alpha1.RoleTest && p.Status.Phase == corev1.PodRunning {
						running = append(running, p.Name)
					}
				}
				g.Expect(running).NotTo(BeEmpty())
			})
		moveOperator(t, c, true)
		done := waitEnv(t, key, 5*time.Minute, false, func(g Gomega, env *v1alpha1.DevEnvironment) {
			readyNow(g, env)
			g.Expect(env.Status.Tests).NotTo(BeEmpty())
			g.Expect(env.Status.Tests[0].Runs).NotTo(BeEmpty())
			g.Expect(env.Status.Tests[0].Runs[0].Result).To(Equal(v1alpha1.ResultPassed))
		})
		runs := done.Status.Tests[0].Runs
		NewWithT(t).Expect(runs).To(HaveLen(1), "one trigger, one run")
		jobs := &batchv1.JobList{}
		NewWithT(t).Expect(c.Client.List(ctx, jobs, client.InNamespace(ns))).To(Succeed())
		var testJobs []string
		for _, j := range jobs.Items {
			if j.Labels[v1alpha1.LabelRole] == v1alpha1.RoleTest && j.Labels[v1alpha1.LabelEnvironment] == v1alpha1.LabelValue("tests") {
				testJobs = append(testJobs, j.Name)
			}
		}
		NewWithT(t).Expect(testJobs).To(ConsistOf(runs[0].JobName), "the suite's Jobs")
		t.Logf("test run %d (%s) %s by job %s, once", runs[0].Number, runs[0].Trigger, runs[0].Result, runs[0].JobName)
	})
}

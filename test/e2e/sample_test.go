//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/cli"
	"github.com/devloop-dev/devloop/internal/devcluster"
	"github.com/devloop-dev/devloop/test/e2e/poll"
)

// TestSample runs the sample of make dev-up through the end-to-end cases
// in order, each building on the state the one before left:
//
//  1. it becomes Ready; the running pods' image IDs are the status digests;
//  4. dual tag: the pod the service starts from the revision tag it got
//     through values runs the validator's digest;
//  2. one source file changed: a new web digest, a rollout, the new pod
//     answers with the change; the validator's digest is unchanged;
//  3. test suites triggered: real Jobs, results, exit codes, log tails;
//  7. the operator killed in the middle of a rollout: the restarted one
//     finishes it, no release left pending;
//  6. the environment deleted: release, Jobs, objects gone.
func TestSample(t *testing.T) {
	c := need(t)
	ctx := context.Background()
	ns := namespace(t, "e2e-sample")
	env := sampleIn(t, ns)
	dir := copyDir(t, c.SampleDir())
	key := client.ObjectKeyFromObject(env)

	start := time.Now()
	pushDir(t, env, dir)
	NewWithT(t).Expect(c.ApplyEnvironment(ctx, env)).To(Succeed())

	t.Run("1 ready, pods run the status digests", func(t *testing.T) {
		g := NewWithT(t)
		env = waitEnv(t, key, 8*time.Minute, false, readyNow)
		t.Logf("Ready %s after apply (two cold in-cluster compiles)", time.Since(start).Round(time.Second))
		web := imageOf(env, "web")
		g.Expect(web).NotTo(BeNil())
		waitPods(t, poll.Wait{What: "one Ready web pod running the status digest", Every: 10 * time.Millisecond, Within: time.Minute},
			ns, webLabels, func(g Gomega, pods []corev1.Pod) {
				pods = poll.Ready(pods)
				g.Expect(pods).To(HaveLen(1))
				g.Expect(pods[0].Status.ContainerStatuses[0].ImageID).To(HaveSuffix(web.Digest))
			})
		g.Expect(componentOf(env, "web").Release.Status).To(Equal("deployed"))
	})

	t.Run("4 dual tag: the spawned pod runs the validator digest", func(t *testing.T) {
		g := NewWithT(t)
		validator := imageOf(env, "validator")
		g.Expect(validator.Tags).To(HaveLen(2))
		revTag := validator.Tags[1]
		g.Expect(revTag).To(HavePrefix("rev-"))
		pod := waitPod(t, poll.Wait{What: "the validator pod the service spawned ran to completion", Every: time.Second, Within: 2 * time.Minute},
			client.ObjectKey{Namespace: ns, Name: "hello-validator"}, func(g Gomega, pod *corev1.Pod) {
				g.Expect(pod.Status.Phase).To(Equal(corev1.PodSucceeded))
			})
		// The service named the image by its revision tag, not a digest.
		g.Expect(pod.Spec.Containers[0].Image).To(Equal(validator.Repository + ":" + revTag))
		g.Expect(pod.Status.ContainerStatuses[0].ImageID).To(HaveSuffix(validator.Digest),
			"the revision tag names the digest the content tag names")
		logs, err := c.Clientset.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(logs)).To(Equal("validator: ok\n"))
	})

	t.Run("2 one file changed: new digest, rollout, nothing else rebuilt", func(t *testing.T) {
		g := NewWithT(t)
		old := *imageOf(env, "web")
		oldValidator := *imageOf(env, "validator")
		setGreeting(t, dir, "hello from e2e")
		t0 := time.Now()
		request := push(t, env, dir)
		env = waitEnv(t, key, 5*time.Minute, false, func(g Gomega, env *v1alpha1.DevEnvironment) {
			g.Expect(env.Status.LastHandledReconcileAt).To(Equal(request))
			readyNow(g, env)
			g.Expect(imageOf(env, "web").Digest).NotTo(Equal(old.Digest))
		})
		web := imageOf(env, "web")
		pod := poll.Ready(waitPods(t, poll.Wait{What: "one Ready web pod running the new digest", Every: 10 * time.Millisecond, Within: time.Minute},
			ns, webLabels, func(g Gomega, pods []corev1.Pod) {
				pods = poll.Ready(pods)
				g.Expect(pods).To(HaveLen(1))
				g.Expect(pods[0].Status.ContainerStatuses[0].ImageID).To(HaveSuffix(web.Digest))
			}))[0]
		t.Logf("changed source to new pod Ready: %s (in-cluster compile, warm cache)", time.Since(t0).Round(time.Millisecond))
		g.Expect(answer(pod.Status.PodIP)).To(Equal("hello from e2e\n"))
		// The validator names its paths (go.mod, cmd/validator): not
		// rebuilt, not re-tagged, no builder Job.
		g.Expect(*imageOf(env, "validator")).To(Equal(oldValidator))
	})

	t.Run("3 test suites run as Jobs", func(t *testing.T) {
		g := NewWithT(t)
		setTrigger(t, env, "smoke,contract,unit-tests")
		env = waitEnv(t, key, 5*time.Minute, false, func(g Gomega, env *v1alpha1.DevEnvironment) {
			for _, s := range []string{"smoke", "contract", "unit-tests"} {
				run := latestRun(env, s)
				g.Expect(run).NotTo(BeNil(), s)
				g.Expect(run.CompletionTime).NotTo(BeNil(), "%s: %s %s", s, run.Result, run.Message)
			}
		})
		smoke, contract, unit := latestRun(env, "smoke"), latestRun(env, "contract"), latestRun(env, "unit-tests")
		for _, r := range []*v1alpha1.TestRun{smoke, contract, unit} {
			t.Logf("run %s #%d: %s exit %v in %s; log tail: %q", r.JobName, r.Number, r.Result, ptrValue(r.ExitCode),
				r.CompletionTime.Sub(r.StartTime.Time), lastLine(r.LogTail))
		}
		g.Expect(smoke.Result).To(Equal(v1alpha1.ResultPassed))
		g.Expect(*smoke.ExitCode).To(BeZero())
		g.Expect(smoke.LogTail).To(ContainSubstring("hello from e2e"))
		g.Expect(smoke.Images).To(HaveKeyWithValue("web", imageOf(env, "web").Digest))
		g.Expect(contract.Result).To(Equal(v1alpha1.ResultFailed))
		g.Expect(*contract.ExitCode).NotTo(BeZero())
		g.Expect(contract.LogTail).To(ContainSubstring("404"))
		g.Expect(unit.Result).To(Equal(v1alpha1.ResultPassed), unit.LogTail)
		g.Expect(unit.LogTail).To(ContainSubstring("ok"))
		// Real Jobs ran real pods.
		for _, r := range []*v1alpha1.TestRun{smoke, contract} {
			job := &batchv1.Job{}
			g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: r.JobName}, job)).To(Succeed())
			g.Expect(job.Status.Succeeded + job.Status.Failed).To(Equal(int32(1)))
		}
		g.Expect(env.Status.LastTestResult).NotTo(BeEmpty())
	})

	t.Run("3b the kubectl plugin against the cluster", func(t *testing.T) {
		g := NewWithT(t)
		plugin := func(args ...string) (int, string) {
			var out bytes.Buffer
			streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out}
			code := cli.Run(ctx, append([]string{"--kubeconfig", c.Kubeconfig, "-n", ns}, args...), streams, cli.Options{})
			t.Logf("kubectl devloop %s -> %d\n%s", strings.Join(args, " "), code, out.String())
			return code, out.String()
		}
		code, _ := plugin("wait", "hello", "--timeout", "2m")
		g.Expect(code).To(BeZero())
		code, out := plugin("status", "hello", "-o", "json")
		g.Expect(code).To(BeZero())
		g.Expect(out).To(ContainSubstring(imageOf(env, "web").Digest))
		// trigger follows the run the real operator starts and exits with
		// its result.
		code, _ = plugin("trigger", "hello", "smoke")
		g.Expect(code).To(BeZero())
		code, out = plugin("trigger", "hello", "contract")
		g.Expect(code).NotTo(BeZero())
		g.Expect(out).To(ContainSubstring("404"))
		code, out = plugin("logs", "hello", "smoke")
		g.Expect(code).To(BeZero())
		g.Expect(out).To(ContainSubstring("hello from e2e"))
		// push: pack, push, request, follow to Ready; the new pod answers.
		setGreeting(t, dir, "hello from the plugin")
		code, _ = plugin("push", dir, "--env", "hello", "--source", "app")
		g.Expect(code).To(BeZero())
		waitAnswersGreeting(t, ns, "hello from the plugin\n")
		code, out = plugin("logs", "hello", "web")
		g.Expect(code).To(BeZero())
		g.Expect(out).To(ContainSubstring("listening on :8080 (hello from the plugin)"))
		env = waitEnv(t, key, time.Minute, false, readyNow)
	})

	t.Run("7 operator killed mid-rollout: the restarted one finishes it", func(t *testing.T) {
		g := NewWithT(t)
		old := *imageOf(env, "web")
		rev := componentOf(env, "web").Release.Revision
		setGreeting(t, dir, "hello after a crash")
		request := push(t, env, dir)
		// Kill the operator once the release is being rolled out.
		waitEnv(t, key, 5*time.Minute, false, func(g Gomega, env *v1alpha1.DevEnvironment) {
			g.Expect(env.Status.LastHandledReconcileAt).To(Equal(request))
			g.Expect(componentOf(env, "web").Phase).To(Equal(v1alpha1.PhaseDeploying))
		})
		killed := killOperator(t)
		t.Logf("killed operator pod %s while web was Deploying", killed)
		env = waitEnv(t, key, 5*time.Minute, false, func(g Gomega, env *v1alpha1.DevEnvironment) {
			readyNow(g, env)
			g.Expect(imageOf(env, "web").Digest).NotTo(Equal(old.Digest))
		})
		rel := componentOf(env, "web").Release
		g.Expect(rel.Status).To(Equal("deployed"))
		g.Expect(rel.Revision).To(BeNumerically(">", rev))
		// No revision of the release is left pending-*.
		secrets := &corev1.SecretList{}
		g.Expect(c.Client.List(ctx, secrets, client.InNamespace(ns), client.MatchingLabels{"owner": "helm", "name": "hello"})).To(Succeed())
		for _, s := range secrets.Items {
			g.Expect(s.Labels["status"]).NotTo(HavePrefix("pending"), s.Name)
		}
		waitAnswersGreeting(t, ns, "hello after a crash\n")
	})

	t.Run("6 deleted: release, Jobs and objects gone", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(c.Client.Delete(ctx, env)).To(Succeed())
		waitCheck(t, poll.Wait{What: "DevEnvironment " + key.String() + " gone", Every: time.Second, Within: 3 * time.Minute}, func(g Gomega) {
			err := c.Client.Get(ctx, key, &v1alpha1.DevEnvironment{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "get: %v", err)
		})
		waitCheck(t, poll.Wait{What: "what the environment deployed gone", Every: time.Second, Within: 2 * time.Minute}, func(g Gomega) {
			for _, list := range []client.ObjectList{&appsv1.DeploymentList{}, &batchv1.JobList{}, &corev1.ServiceList{}, &corev1.PersistentVolumeClaimList{}} {
				g.Expect(c.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
				g.Expect(metaItems(list)).To(BeEmpty(), "%T", list)
			}
			secrets := &corev1.SecretList{}
			g.Expect(c.Client.List(ctx, secrets, client.InNamespace(ns), client.MatchingLabels{"owner": "helm"})).To(Succeed())
			g.Expect(secrets.Items).To(BeEmpty(), "helm release storage")
			pods := &corev1.PodList{}
			g.Expect(c.Client.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
			g.Expect(pods.Items).To(BeEmpty(), "pods (the validator goes with the web pod that owns it)")
		})
	})
}

// waitAnswersGreeting waits until the sample's one Ready web pod answers
// greeting.
func waitAnswersGreeting(t *testing.T, ns, greeting string) {
	t.Helper()
	waitPods(t, poll.Wait{What: "the web pod answers " + strconv.Quote(greeting), Every: 10 * time.Millisecond, Within: time.Minute},
		ns, webLabels, func(g Gomega, pods []corev1.Pod) {
			pods = poll.Ready(pods)
			g.Expect(pods).To(HaveLen(1))
			g.Expect(answer(pods[0].Status.PodIP)).To(Equal(greeting))
		})
}

// setTrigger sets the trigger annotation as `kubectl annotate` does.
func setTrigger(t *testing.T, env *v1alpha1.DevEnvironment, value string) {
	t.Helper()
	key := client.ObjectKeyFromObject(env)
	waitFor(t, poll.Wait{What: "trigger " + value + " set on " + key.String(), Every: 200 * time.Millisecond, Within: time.Minute},
		poll.Succeeds(func(ctx context.Context) error {
			cur := &v1alpha1.DevEnvironment{}
			if err := dc.Client.Get(ctx, key, cur); err != nil {
				return err
			}
			if cur.Annotations == nil {
				cur.Annotations = map[string]string{}
			}
			if v, busy := cur.Annotations[v1alpha1.TriggerAnnotation]; busy {
				return fmt.Errorf("a trigger is still pending (%s)", v)
			}
			cur.Annotations[v1alpha1.TriggerAnnotation] = value
			return dc.Client.Update(ctx, cur)
		}))
}

// waitTestRun waits until run #n of suite has finished, and returns it.
func waitTestRun(t *testing.T, key client.ObjectKey, suite string, n int64) *v1alpha1.TestRun {
	t.Helper()
	var run *v1alpha1.TestRun
	waitEnv(t, key, 10*time.Minute, true, func(g Gomega, env *v1alpha1.DevEnvironment) {
		run = latestRun(env, suite)
		g.Expect(run).NotTo(BeNil(), "no run of %s", suite)
		g.Expect(run.Number).To(Equal(n), "latest run of %s", suite)
		g.Expect(run.Result.Finished()).To(BeTrue(), "run #%d: %s %s", n, run.Result, run.Message)
	})
	return run
}

func latestRun(env *v1alpha1.DevEnvironment, suite string) *v1alpha1.TestRun {
	for i := range env.Status.Tests {
		if env.Status.Tests[i].Name == suite && len(env.Status.Tests[i].Runs) > 0 {
			return &env.Status.Tests[i].Runs[0]
		}
	}
	return nil
}

// killOperator deletes the operator's pod with no grace period, as an OOM
// kill or a node loss would end it, and returns its name.
func killOperator(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	pods := &corev1.PodList{}
	NewWithT(t).Expect(dc.Client.List(ctx, pods, client.InNamespace(devcluster.OperatorNamespace),
		client.MatchingLabels{"app.kubernetes.io/component": "manager"})).To(Succeed())
	NewWithT(t).Expect(pods.Items).NotTo(BeEmpty())
	zero := int64(0)
	for _, p := range pods.Items {
		NewWithT(t).Expect(dc.Client.Delete(ctx, &p, &client.DeleteOptions{GracePeriodSeconds: &zero})).To(Succeed())
	}
	return pods.Items[0].Name
}

func metaItems(list client.ObjectList) []any {
	switch l := list.(type) {
	case *appsv1.DeploymentList:
		return anySlice(l.Items)
	case *batchv1.JobList:
		return anySlice(l.Items)
	case *corev1.ServiceList:
		return anySlice(l.Items)
	case *corev1.PersistentVolumeClaimList:
		return anySlice(l.Items)
	}
	return nil
}

func anySlice[T any](items []T) []any {
	out := make([]any, len(items))
	for i := range items {
		out[i] = items[i]
	}
	return out
}

func ptrValue(p *int32) any {
	if p == nil {
		return nil
	}
	return *p
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndex(s, "\n"); i >= 0 {
		return s[i+1:]
	}
	return s
}

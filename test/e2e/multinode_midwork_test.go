//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	. "github.com/devloop-dev/devloop/test/builder"
	. "github.com/devloop-dev/devloop/test/e2e/fixture"
	"github.com/devloop-dev/devloop/test/e2e/poll"
)

// slowUpgradeChart is a chart whose upgrade takes as long as its
// pre-upgrade hook, a Job sleeping 20 s, so the operator can be killed
// while the release is pending-upgrade.
var slowUpgradeChart = Files{
	"chart/Chart.yaml":  "apiVersion: v2\nname: slow\nversion: 0.1.0\n",
	"chart/values.yaml": "greeting: one\n",
	"chart/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: greeting}\n" +
		"data: {greeting: {{ .Values.greeting | quote }}}\n",
	"chart/templates/hook.yaml": `apiVersion: batch/v1
kind: Job
metadata:
  name: slow-hook
  annotations:
    helm.sh/hook: pre-upgrade
    helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded
spec:
  backoffLimit: 0
  template:
    metadata: {labels: {app: slow-hook}}
    spec:
      restartPolicy: Never
      terminationGracePeriodSeconds: 1
      securityContext: {runAsNonRoot: true, runAsUser: 65534, seccompProfile: {type: RuntimeDefault}}
      containers:
      - name: hook
        image: ` + busybox + `
        command: [sh, -c, "sleep 20"]
        securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
`,
}

// helmReleaseSecrets are Helm's stored revisions of release in ns.
func helmReleaseSecrets(g Gomega, ns, release string) []corev1.Secret {
	secrets := &corev1.SecretList{}
	g.Expect(dc.Client.List(context.Background(), secrets, client.InNamespace(ns), client.MatchingLabels{"owner": "helm", "name": release})).To(Succeed())
	return secrets.Items
}

// TestMultiNodeOperatorKilledMidHelmUpgrade (issue 45, "Operator moves
// mid-work"): a chart component's values change; while the upgrade runs
// (its pre-upgrade hook Job sleeping), the operator's node is cordoned and
// its pod killed (grace 0). The new operator, on the other node, finishes
// the upgrade: the new values in the cluster, the latest revision
// deployed, no revision left pending, the hook Job not left behind. The
// operator runs as the chart installs it, with leader election: the new
// leader knows the pending revision is its lease's previous holder's and
// unlocks it at once, never waiting out the action's timeout.
func TestMultiNodeOperatorKilledMidHelmUpgrade(t *testing.T) {
	c := need(t)
	twoNodes(t, c)
	ctx := context.Background()
	operatorForTheCase(t, c, map[string]any{"leaderElection": map[string]any{"enabled": true}})
	ns := namespace(t, "e2e-opkill-helm")
	env := newEnv(ns, "slow").Components(Component("slow", Chart("chart", func(h *v1alpha1.HelmSpec) {
		h.ReleaseName = "slow"
		// Short, so that were the pending revision the killed operator
		// leaves waited out (timeout and a minute after it started), the
		// case would still end in minutes.
		h.Timeout = &metav1.Duration{Duration: 45 * time.Second}
	}))).Build()
	pushDir(t, env, sourceDir(t, slowUpgradeChart))
	NewWithT(t).Expect(c.Client.Create(ctx, env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)
	waitEnv(t, key, 3*time.Minute, false, func(g Gomega, env *v1alpha1.DevEnvironment) { readyNow(g, env) })

	cur := &v1alpha1.DevEnvironment{}
	NewWithT(t).Expect(c.Client.Get(ctx, key, cur)).To(Succeed())
	patched := cur.DeepCopy()
	patched.Spec.Components[0].Helm.Values = &apiextensionsv1.JSON{Raw: []byte(`{"greeting":"two"}`)}
	NewWithT(t).Expect(c.Client.Patch(ctx, patched, client.MergeFrom(cur))).To(Succeed())
	waitCheck(t, poll.Wait{What: "the upgrade pending, its hook running", Every: 200 * time.Millisecond, Within: 2 * time.Minute}, func(g Gomega) {
		var pending bool
		for _, s := range helmReleaseSecrets(g, ns, "slow") {
			pending = pending || s.Labels["status"] == "pending-upgrade"
		}
		g.Expect(pending).To(BeTrue(), "no revision pending-upgrade")
		pods := &corev1.PodList{}
		g.Expect(c.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app": "slow-hook"})).To(Succeed())
		var running bool
		for _, p := range poll.Live(pods.Items) {
			running = running || p.Status.Phase == corev1.PodRunning
		}
		g.Expect(running).To(BeTrue(), poll.DescribePods(pods.Items))
	})
	start := time.Now()
	moveOperator(t, c, true)

	var seen []string
	done := waitEnv(t, key, 6*time.Minute, false, func(g Gomega, env *v1alpha1.DevEnvironment) {
		if m := conditionMessages(env); len(seen) == 0 || seen[len(seen)-1] != m {
			seen = append(seen, m)
		}
		readyNow(g, env)
		cm := &corev1.ConfigMap{}
		g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "greeting"}, cm)).To(Succeed())
		g.Expect(cm.Data).To(HaveKeyWithValue("greeting", "two"))
	})
	t.Logf("upgrade finished by the new operator %s after the kill; status on the way:\n%s", time.Since(start).Round(100*time.Millisecond),
		fmt.Sprint(seen))
	for _, m := range seen {
		NewWithT(t).Expect(m).NotTo(ContainSubstring("another helm action may be running"),
			"the new leader waited for the revision its lease's previous holder left pending")
	}
	waitCheck(t, poll.Wait{What: "no revision pending, the latest deployed, no hook Job left", Every: 500 * time.Millisecond, Within: time.Minute}, func(g Gomega) {
		latest, status := 0, ""
		var revisions []string
		for _, s := range helmReleaseSecrets(g, ns, "slow") {
			revisions = append(revisions, s.Labels["version"]+":"+s.Labels["status"])
			g.Expect(s.Labels["status"]).NotTo(HavePrefix("pending-"), "revision %s", s.Labels["version"])
			var v int
			_, _ = fmt.Sscan(s.Labels["version"], &v)
			if v > latest {
				latest, status = v, s.Labels["status"]
			}
		}
		g.Expect(status).To(Equal("deployed"), "revisions %v", revisions)
		jobs := &batchv1.JobList{}
		g.Expect(c.Client.List(ctx, jobs, client.InNamespace(ns))).To(Succeed())
		var names []string
		for _, j := range jobs.Items {
			names = append(names, j.Name)
		}
		g.Expect(names).To(BeEmpty(), "Jobs left in %s", ns)
	})
	t.Logf("status: %s", conditionMessages(done))
}

// TestMultiNodeLivePodMoved (issue 45, "A live-update pod rescheduled to
// another node gets the live digest, not the template's"): a live update
// reaches the pod; its node is cordoned and the pod deleted; the pod that
// replaces it on the other node serves the live version, and the next
// push live-updates that pod (no new pod), status saying live.
func TestMultiNodeLivePodMoved(t *testing.T) {
	c := need(t)
	twoNodes(t, c)
	ctx := context.Background()
	ns := namespace(t, "e2e-live-moved")
	env, live := startLiveServer(t, ns)
	dir, server, bin := live.dir, live.server, live.bin
	key := client.ObjectKeyFromObject(env)

	// servingIn waits until one Ready bench pod (not not) serves version v.
	servingIn := func(v int, not string) corev1.Pod {
		var pod corev1.Pod
		want := fmt.Sprintf("version %d iteration 0", v)
		waitPods(t, poll.Wait{What: "one Ready bench pod serving " + want, Every: 200 * time.Millisecond, Within: 3 * time.Minute},
			ns, benchLabels, func(g Gomega, pods []corev1.Pod) {
				pods = poll.Live(pods)
				g.Expect(pods).To(HaveLen(1))
				g.Expect(pods[0].Name).NotTo(Equal(not))
				g.Expect(poll.IsReady(&pods[0])).To(BeTrue())
				g.Expect(probe(ns, pods[0].Name)(ctx)).To(Equal(want))
				pod = pods[0]
			})
		return pod
	}
	liveUpdated := func(v int, pod corev1.Pod) *v1alpha1.DevEnvironment {
		writeBenchServer(t, bin, server, v)
		request := push(t, env, dir)
		servingIn(v, "")
		done := waitEnv(t, key, 2*time.Minute, false, func(g Gomega, env *v1alpha1.DevEnvironment) {
			g.Expect(env.Status.LastHandledReconcileAt).To(Equal(request))
			readyNow(g, env)
			ist := imageOf(env, "server")
			g.Expect(ist.LastUpdate).To(Equal(v1alpha1.UpdateLive), "update reason: %s", ist.UpdateReason)
			g.Expect(ist.LiveDigest).To(Equal(ist.Digest))
		})
		still := livePods(NewWithT(t), ns)
		NewWithT(t).Expect(still).To(HaveLen(1))
		NewWithT(t).Expect(still[0].Name).To(Equal(pod.Name), "version %d came with a new pod, not a live update", v)
		NewWithT(t).Expect(still[0].Annotations).To(HaveKeyWithValue(v1alpha1.LiveDigestAnnotation, imageOf(done, "server").Digest))
		return done
	}

	first := servingIn(0, "")
	liveUpdated(1, first)

	// The pod moves: its node cordoned, the pod deleted.
	kubectl(t, c, "cordon", first.Spec.NodeName)
	t.Cleanup(func() { kubectl(t, c, "uncordon", first.Spec.NodeName) })
	start := time.Now()
	NewWithT(t).Expect(c.Client.Delete(ctx, &first)).To(Succeed())
	moved := servingIn(1, first.Name)
	NewWithT(t).Expect(moved.Spec.NodeName).NotTo(Equal(first.Spec.NodeName))
	t.Logf("pod %s on %s deleted: %s on %s serving the live version 1 after %s", first.Name, first.Spec.NodeName,
		moved.Name, moved.Spec.NodeName, time.Since(start).Round(100*time.Millisecond))

	done := liveUpdated(2, moved)
	t.Logf("version 2 live-updated in the moved pod %s: %s", moved.Name, imageOf(done, "server").UpdateReason)
}

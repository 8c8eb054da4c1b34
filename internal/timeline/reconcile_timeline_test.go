package timeline_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/timeline"
	"github.com/devloop-dev/devloop/test/builder"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// webFiles are WebEnv's source with a ConfigMap to apply under deploy/,
// so the component is Ready in envtest (no kubelet runs a pod).
func webFiles(binary string) map[string]string {
	files := operatortest.WebFiles(binary)
	// The manifest changes with the binary, so every change deploys.
	files["deploy/settings.yaml"] = fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {binary: %q}\n", binary)
	return files
}

// webEnv is WebEnv under the real deploy engine, acting as the deployer:
// an in-process image built and pushed, manifests applied.
func webEnv(t *testing.T, ns string) *v1alpha1.DevEnvironment {
	operatortest.UseDeployEngine(ns)
	operatortest.CreateDeployer(t, ns, operatortest.Deployer)
	env := operatortest.AsDeployer(operatortest.WebEnv(ns))
	env.Spec.Components[0].Manifests.Paths = []string{"deploy"}
	return env
}

// readTimeline reads the environment's timeline ConfigMap as the admin.
func readTimeline(g Gomega, ns, env string) (*corev1.ConfigMap, []timeline.Change) {
	cm := &corev1.ConfigMap{}
	g.Expect(operatortest.Admin.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: timeline.ConfigMapName(env)}, cm)).To(Succeed())
	changes, err := timeline.Decode(cm)
	g.Expect(err).NotTo(HaveOccurred())
	return cm, changes
}

// waitForChange waits until the newest change carries digest and ended
// as want, and returns the ConfigMap and the timeline.
func waitForChange(t *testing.T, ns, env, digest string, want timeline.Result) (*corev1.ConfigMap, []timeline.Change) {
	t.Helper()
	var cm *corev1.ConfigMap
	var changes []timeline.Change
	NewWithT(t).Eventually(func(g Gomega) {
		cm, changes = readTimeline(g, ns, env)
		g.Expect(changes).NotTo(BeEmpty())
		g.Expect(changes[0].Revision).To(HaveSuffix("@" + digest))
		g.Expect(changes[0].Result).To(Equal(want), "newest change: %+v", changes[0])
	}, operatortest.Timeout, 100*time.Millisecond).Should(Succeed())
	return cm, changes
}

// stepNames lists a change's steps as name or name:component.
func stepNames(c timeline.Change) []string {
	var out []string
	for _, s := range c.Steps {
		name := string(s.Name)
		if s.Component != "" {
			name += ":" + s.Component
		}
		out = append(out, name)
	}
	return out
}

func printChange(t *testing.T, c timeline.Change) {
	t.Helper()
	t.Logf("change %s %s %s (started %s)", c.Source, c.Revision, c.Result, c.Started.Format(time.RFC3339Nano))
	for _, s := range c.Steps {
		t.Logf("  %-10s %-8s %s", s.Name, s.Component, s.Duration)
	}
}

func TestPushRecordsAChangeFromFetchToReady(t *testing.T) {
	g := NewWithT(t)
	ns := operatortest.Namespace(t)
	first := operatortest.AppFiles(t, ns, webFiles("binary v1"))
	env := webEnv(t, ns)
	key := operatortest.CreateEnv(t, env)

	// The first revision is a change too: from nothing to serving.
	cm, changes := waitForChange(t, ns, env.Name, first.String(), timeline.Serving)
	g.Expect(changes).To(HaveLen(1))
	cur := &v1alpha1.DevEnvironment{}
	g.Expect(operatortest.Admin.Get(context.Background(), key, cur)).To(Succeed())
	g.Expect(metav1.IsControlledBy(cm, cur)).To(BeTrue(), "owned by the environment: %v", cm.OwnerReferences)
	g.Expect(cm.Labels).To(HaveKeyWithValue(v1alpha1.LabelRole, timeline.Role))
	g.Expect(cm.Labels).To(HaveKeyWithValue(v1alpha1.LabelEnvironment, env.Name))

	// A push as `kubectl devloop push` makes it: new content, what the
	// client measured on the environment, and a reconcile request.
	second := operatortest.AppFiles(t, ns, webFiles("binary v2"))
	pushedAt := time.Now().Add(-2 * time.Second)
	pushed := timeline.Pushed{Source: builder.AppSource, Digest: second.String(), At: pushedAt,
		Pack: 300 * time.Millisecond, Upload: 700 * time.Millisecond}
	operatortest.Annotate(t, cur, timeline.PushedAnnotation, pushed.String())
	operatortest.RequestReconcile(t, cur)

	_, changes = waitForChange(t, ns, env.Name, second.String(), timeline.Serving)
	c := changes[0]
	printChange(t, c)
	g.Expect(changes).To(HaveLen(2))
	g.Expect(changes[1].Revision).To(HaveSuffix("@" + first.String()))
	g.Expect(c.Source).To(Equal(builder.AppSource))
	g.Expect(c.Started).To(BeTemporally("~", pushedAt, time.Millisecond), "started when the client began packing")
	g.Expect(stepNames(c)).To(Equal([]string{"Pack", "Upload", "Fetch", "Assemble:web/web", "Push:web/web", "Deploy:web", "Ready:web"}))
	g.Expect(c.Steps[0].Duration).To(Equal(300 * time.Millisecond))
	g.Expect(c.Steps[1].Duration).To(Equal(700 * time.Millisecond))
	g.Expect(c.Serving).NotTo(BeNil())
	end := c.Started
	for _, s := range c.Steps {
		g.Expect(s.Start).NotTo(BeTemporally("<", end.Add(-time.Millisecond)), "step %s starts before the one before it ended", s.Name)
		g.Expect(s.Duration).To(BeNumerically(">=", 0))
		end = s.Start.Add(s.Duration)
	}
	g.Expect(c.Serving.Before(end.Add(-time.Millisecond))).To(BeFalse(), "serving before its last step ended")
	t.Logf("change to serving: %s", c.Serving.Sub(c.Started))
}

func TestUnchangedEnvironmentWritesNoTimeline(t *testing.T) {
	g := NewWithT(t)
	ns := operatortest.Namespace(t)
	digest := operatortest.AppFiles(t, ns, webFiles("binary v1"))
	env := webEnv(t, ns)
	key := operatortest.CreateEnv(t, env)
	cm, _ := waitForChange(t, ns, env.Name, digest.String(), timeline.Serving)

	// Reconciles with nothing changed (each seen handled) leave the
	// timeline's ConfigMap as it was.
	cur := &v1alpha1.DevEnvironment{}
	for i := 0; i < 3; i++ {
		g.Expect(operatortest.Admin.Get(context.Background(), key, cur)).To(Succeed())
		request := operatortest.RequestReconcile(t, cur)
		operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
			g.Expect(env.Status.LastHandledReconcileAt).To(Equal(request))
			operatortest.ExpectReadyAndCurrent(g, env)
		})
	}
	after, changes := readTimeline(g, ns, env.Name)
	g.Expect(after.ResourceVersion).To(Equal(cm.ResourceVersion), "the timeline was written with nothing changed")
	g.Expect(changes).To(HaveLen(1))
}

func TestNewRevisionSupersedesTheChangeInFlightAndHistoryIsBounded(t *testing.T) {
	g := NewWithT(t)
	ns := operatortest.Namespace(t)
	// The scripted deploy engine holds component "web" Deploying: no
	// change can reach Ready until the script says so.
	operatortest.ScriptedDeploy.Set(ns, "web", v1alpha1.PhaseDeploying, nil)
	digest := operatortest.AppFiles(t, ns, map[string]string{"a": "0"})
	env := operatortest.Env(ns, "web").AppSource().Components(builder.Component("web", builder.Manifests())).Create(t, operatortest.Admin)
	key := client.ObjectKeyFromObject(env)
	waitForChange(t, ns, env.Name, digest.String(), timeline.InFlight)

	pushes := timeline.MaxChanges + 2
	for i := 1; i <= pushes; i++ {
		digest = operatortest.AppFiles(t, ns, map[string]string{"a": fmt.Sprint(i)})
		cur := &v1alpha1.DevEnvironment{}
		g.Expect(operatortest.Admin.Get(context.Background(), key, cur)).To(Succeed())
		operatortest.RequestReconcile(t, cur)
		waitForChange(t, ns, env.Name, digest.String(), timeline.InFlight)
	}
	_, changes := readTimeline(g, ns, env.Name)
	g.Expect(changes).To(HaveLen(timeline.MaxChanges), "history bounded")
	for _, c := range changes[1:] {
		g.Expect(c.Result).To(Equal(timeline.Superseded), "change %s", c.Revision)
	}

	// Once the component is Ready, the newest change serves.
	operatortest.ScriptedDeploy.Set(ns, "web", v1alpha1.PhaseReady, nil)
	cur := &v1alpha1.DevEnvironment{}
	g.Expect(operatortest.Admin.Get(context.Background(), key, cur)).To(Succeed())
	operatortest.RequestReconcile(t, cur)
	_, changes = waitForChange(t, ns, env.Name, digest.String(), timeline.Serving)
	g.Expect(changes).To(HaveLen(timeline.MaxChanges))
}

func TestTimelineNeverAdoptsAForeignConfigMap(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	// Two namespaces, an environment "web" in each; in A a ConfigMap of
	// the timeline's name that is not the environment's (a tenant's own,
	// or one planted to be overwritten).
	nsA, nsB := operatortest.Namespace(t), operatortest.Namespace(t)
	foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: timeline.ConfigMapName("web")},
		Data: map[string]string{"mine": "keep"}}
	g.Expect(operatortest.Admin.Create(ctx, foreign)).To(Succeed())
	digestA := operatortest.AppFiles(t, nsA, webFiles("binary a"))
	digestB := operatortest.AppFiles(t, nsB, webFiles("binary b"))
	envA, envB := webEnv(t, nsA), webEnv(t, nsB)
	keyA := operatortest.CreateEnv(t, envA)
	operatortest.CreateEnv(t, envB)

	// B's timeline is written, owned by B; A is Ready all the same.
	cmB, _ := waitForChange(t, nsB, envB.Name, digestB.String(), timeline.Serving)
	g.Expect(cmB.OwnerReferences).To(HaveLen(1))
	g.Expect(cmB.OwnerReferences[0].UID).NotTo(BeEmpty())
	a := operatortest.WaitForEnv(t, keyA, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		g.Expect(env.Status.Source(builder.AppSource).Digest).To(Equal(digestA.String()))
	})
	// The timeline is flushed before status is written, so the reconcile
	// that made A Ready on its source has had its try at the ConfigMap:
	// it is as it was.
	cm := &corev1.ConfigMap{}
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKeyFromObject(foreign), cm)).To(Succeed())
	g.Expect(cm.Data).To(Equal(map[string]string{"mine": "keep"}))
	g.Expect(cm.OwnerReferences).To(BeEmpty())
	g.Expect(cm.Labels).To(BeEmpty())
	// And the operator said why A has no timeline.
	g.Eventually(func(g Gomega) {
		events := &corev1.EventList{}
		g.Expect(operatortest.Admin.List(ctx, events, client.InNamespace(nsA))).To(Succeed())
		found := false
		for _, e := range events.Items {
			found = found || (e.Reason == "TimelineNotWritten" && e.InvolvedObject.UID == a.UID)
		}
		g.Expect(found).To(BeTrue(), "a TimelineNotWritten event for A")
	}, operatortest.Timeout, 100*time.Millisecond).Should(Succeed())

	// Once the ConfigMap is gone, A's next change writes A's timeline.
	g.Expect(operatortest.Admin.Delete(ctx, foreign)).To(Succeed())
	next := operatortest.AppFiles(t, nsA, webFiles("binary a2"))
	operatortest.RequestReconcile(t, a)
	cmA, changes := waitForChange(t, nsA, envA.Name, next.String(), timeline.Serving)
	g.Expect(metav1.IsControlledBy(cmA, a)).To(BeTrue(), "owned by A: %v", cmA.OwnerReferences)
	g.Expect(changes).To(HaveLen(2))
}

// An operator that restarts has lost its recorder: it reads the timeline
// back, records no change twice, and goes on after the history.
func TestRestartedOperatorReadsTheTimelineBack(t *testing.T) {
	g := NewWithT(t)
	ns := operatortest.Namespace(t)
	first := operatortest.AppFiles(t, ns, webFiles("binary v1"))
	env := webEnv(t, ns)
	key := operatortest.CreateEnv(t, env)
	cm, _ := waitForChange(t, ns, env.Name, first.String(), timeline.Serving)
	cur := &v1alpha1.DevEnvironment{}
	g.Expect(operatortest.Admin.Get(context.Background(), key, cur)).To(Succeed())

	// What a restart loses.
	operatortest.Reconciler.Timeline.Forget(cur.UID)
	request := operatortest.RequestReconcile(t, cur)
	operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.LastHandledReconcileAt).To(Equal(request))
		operatortest.ExpectReadyAndCurrent(g, env)
	})
	after, changes := readTimeline(g, ns, env.Name)
	g.Expect(after.ResourceVersion).To(Equal(cm.ResourceVersion), "a reconcile after the restart rewrote the timeline")
	g.Expect(changes).To(HaveLen(1))

	operatortest.Reconciler.Timeline.Forget(cur.UID)
	second := operatortest.AppFiles(t, ns, webFiles("binary v2"))
	operatortest.RequestReconcile(t, cur)
	_, changes = waitForChange(t, ns, env.Name, second.String(), timeline.Serving)
	g.Expect(changes).To(HaveLen(2), "the history before the restart is kept")
	g.Expect(changes[1].Revision).To(HaveSuffix("@" + first.String()))
	g.Expect(changes[1].Result).To(Equal(timeline.Serving))
}

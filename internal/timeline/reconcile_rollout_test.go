package timeline_test

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/timeline"
	"github.com/devloop-dev/devloop/test/builder"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// deploymentFiles are webFiles with a Deployment running the built image:
// every new binary changes its pod template, a rollout.
func deploymentFiles(binary string) map[string]string {
	files := webFiles(binary)
	files["deploy/web.yaml"] = operatortest.WebDeployment
	return files
}

// waitForRollout waits until the newest change carries digest, is in
// flight and shows web's Rollout running, and returns it.
func waitForRollout(t *testing.T, ns, env, digest string) timeline.Change {
	t.Helper()
	var c timeline.Change
	NewWithT(t).Eventually(func(g Gomega) {
		_, changes := readTimeline(g, ns, env)
		g.Expect(changes).NotTo(BeEmpty())
		c = changes[0]
		g.Expect(c.Revision).To(HaveSuffix("@" + digest))
		g.Expect(c.Result).To(Equal(timeline.InFlight))
		g.Expect(stepNames(c)).To(ContainElement("Rollout:web"), "steps of the change in flight")
	}, operatortest.Timeout, 100*time.Millisecond).Should(Succeed())
	return c
}

// TestPushThatRollsOutRecordsDeployRolloutReady: a push whose new image
// the Deployment's template runs is Deploy, then the Rollout (running
// while the Deployment is not rolled out, as the page shows it), then
// Ready. envtest runs no Deployment controller: the test writes the
// status one would once the new pods are up.
func TestPushThatRollsOutRecordsDeployRolloutReady(t *testing.T) {
	g := NewWithT(t)
	ns := operatortest.Namespace(t)
	first := operatortest.AppFiles(t, ns, deploymentFiles("binary v1"))
	env := webEnv(t, ns)
	key := operatortest.CreateEnv(t, env)
	// The first revision creates the Deployment: a rollout too.
	waitForRollout(t, ns, env.Name, first.String())
	operatortest.MarkDeploymentAvailable(t, ns, "web")
	_, changes := waitForChange(t, ns, env.Name, first.String(), timeline.Serving)
	g.Expect(stepNames(changes[0])).To(ContainElements("Deploy:web", "Rollout:web", "Ready:web"))

	second := operatortest.AppFiles(t, ns, deploymentFiles("binary v2"))
	cur := &v1alpha1.DevEnvironment{}
	g.Expect(operatortest.Admin.Get(context.Background(), key, cur)).To(Succeed())
	operatortest.RequestReconcile(t, cur)
	running := waitForRollout(t, ns, env.Name, second.String())
	rollout := running.Steps[len(running.Steps)-1]
	g.Expect(rollout.Name).To(Equal(timeline.Rollout), "the running Rollout is the newest step: %v", stepNames(running))
	g.Expect(rollout.Duration).To(BeZero(), "running")
	// The environment says the same: reconciling, not Ready.
	operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(operatortest.PhaseOf(env, "web")).To(Equal(v1alpha1.PhaseDeploying))
		g.Expect(env.Status.Component("web").Images[0].Revision).To(HaveSuffix("@" + second.String()))
	})

	operatortest.MarkDeploymentAvailable(t, ns, "web")
	_, changes = waitForChange(t, ns, env.Name, second.String(), timeline.Serving)
	c := changes[0]
	printChange(t, c)
	g.Expect(stepNames(c)).To(Equal([]string{"Fetch", "Assemble:web/web", "Push:web/web", "Deploy:web", "Rollout:web", "Ready:web"}))
	deploy, rolled, ready := c.Steps[3], c.Steps[4], c.Steps[5]
	g.Expect(rolled.Start).To(BeTemporally("==", deploy.Start.Add(deploy.Duration)), "the Rollout starts where the Deploy ends")
	g.Expect(ready.Start).To(BeTemporally("==", rolled.Start.Add(rolled.Duration)), "Ready starts where the Rollout ends")
	// The Rollout was seen running before the Deployment was marked
	// rolled out, and the reconcile that found it so began after: it
	// cannot be empty.
	g.Expect(rolled.Duration).To(BeNumerically(">", 0))
	// Fetch is what fetching the new revision took: the reconciles
	// during the rollout served it from the store and must not stretch
	// the step over the whole change ("fetching 33 KiB took 37 s").
	fetch := c.Steps[0]
	g.Expect(fetch.Start.Add(fetch.Duration)).NotTo(BeTemporally(">", deploy.Start), "Fetch (%s) ends after the Deploy began", fetch.Duration)
	// The build's steps may overlap the fetch (content is read as the
	// image is assembled); each lies within the change.
	for _, s := range c.Steps {
		g.Expect(s.Start).NotTo(BeTemporally("<", c.Started), "step %s starts before the change", s.Name)
		g.Expect(s.Duration).To(BeNumerically(">=", 0))
		g.Expect(c.Serving.Before(s.Start.Add(s.Duration))).To(BeFalse(), "serving before step %s ended", s.Name)
	}
	g.Expect(*c.Serving).To(BeTemporally("==", ready.Start.Add(ready.Duration)), "serving when Ready was observed")
	t.Logf("deploy %s, rollout %s, ready %s; change to serving %s", deploy.Duration, rolled.Duration, ready.Duration, c.Serving.Sub(c.Started))
}

// TestTransientErrorKeepsTheChangeInFlight: a reconcile that fails with an
// error it retries (the environment Reconciling with the error, not
// Stalled) leaves the change in flight through the retries; it serves
// once one gets through.
func TestTransientErrorKeepsTheChangeInFlight(t *testing.T) {
	g := NewWithT(t)
	ns := operatortest.Namespace(t)
	digest := operatortest.AppFiles(t, ns, map[string]string{"a": "0"})
	env := operatortest.Env(ns, "web").AppSource().Components(builder.Component("web", builder.Manifests())).Create(t, operatortest.Admin)
	key := client.ObjectKeyFromObject(env)
	waitForChange(t, ns, env.Name, digest.String(), timeline.Serving)

	operatortest.ScriptedDeploy.Set(ns, "web", v1alpha1.PhaseDeploying, errors.New("dial tcp 10.0.0.1:443: connection reset by peer"))
	next := operatortest.AppFiles(t, ns, map[string]string{"a": "1"})
	operatortest.RequestReconcile(t, env)
	operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		src := env.Status.Source(builder.AppSource)
		g.Expect(src).NotTo(BeNil())
		g.Expect(src.Digest).To(Equal(next.String()))
		reconciling := operatortest.EnvCondition(env, v1alpha1.ConditionReconciling)
		g.Expect(reconciling).NotTo(BeNil(), "Reconciling; conditions %s", operatortest.ConditionsSummary(env))
		g.Expect(reconciling.Message).To(ContainSubstring("connection reset by peer"))
		g.Expect(operatortest.EnvCondition(env, v1alpha1.ConditionStalled)).To(BeNil())
		g.Expect(conditionStatus(env, v1alpha1.ConditionReady)).To(Equal(metav1.ConditionFalse))
	})
	// Retried (with backoff) a few times, the change is still in flight.
	calls := operatortest.ScriptedDeploy.Calls(ns, "web")
	g.Eventually(func() int { return operatortest.ScriptedDeploy.Calls(ns, "web") }, operatortest.Timeout, 50*time.Millisecond).
		Should(BeNumerically(">=", calls+2))
	_, changes := readTimeline(g, ns, env.Name)
	g.Expect(changes[0].Revision).To(HaveSuffix("@" + next.String()))
	g.Expect(changes[0].Result).To(Equal(timeline.InFlight), "after a transient error: %+v", changes[0])
	g.Expect(changes[0].Message).To(BeEmpty())

	operatortest.ScriptedDeploy.Set(ns, "web", v1alpha1.PhaseReady, nil)
	waitForChange(t, ns, env.Name, next.String(), timeline.Serving)
}

// conditionStatus is the status of env's condition typ ("" when it has none).
func conditionStatus(env *v1alpha1.DevEnvironment, typ string) metav1.ConditionStatus {
	for _, c := range env.Status.Conditions {
		if c.Type == typ {
			return c.Status
		}
	}
	return ""
}

package deploy_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/test/builder"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// TestStatusDuringAHelmUpgradeIsNeverCurrent: a source change upgrades a
// release whose pre-upgrade hook Job Helm waits for. kstatus, reading the
// environment as Flux and kubectl wait do, samples it all along: from
// the moment the hook exists until the upgrade ends it never reads
// Current, and Ready is never True; once the hook completes the
// environment is Ready at the new revision.
func TestStatusDuringAHelmUpgradeIsNeverCurrent(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := operatortest.DeployNamespace(t)
	files := operatortest.ChartFiles(t, "upgradehook", "chart")
	operatortest.AppFiles(t, ns, files)
	env := operatortest.Env(ns, "upgrades").ServiceAccount(operatortest.Deployer).AppSource().Components(builder.Component("app", builder.Chart("chart"))).Create(t, operatortest.Admin)
	key := client.ObjectKeyFromObject(env)
	env = operatortest.WaitForEnv(t, key, operatortest.ExpectReadyAndCurrent)
	g.Expect(env.Status.Component("app").Release.Revision).To(Equal(1))

	// A new chart value in the source (no spec change): an upgrade.
	files["chart/values.yaml"] = "version: \"2\"\n"
	operatortest.AppFiles(t, ns, files)

	sampler := sampleKstatus(t, key)
	_ = operatortest.RequestReconcile(t, env)
	hook := client.ObjectKey{Namespace: ns, Name: "app-migrate"}
	g.Eventually(func() error { return operatortest.Admin.Get(ctx, hook, &batchv1.Job{}) }, operatortest.Timeout, 20*time.Millisecond).Should(Succeed(), "the pre-upgrade hook runs")
	hookSeen := time.Now()
	// Helm waits for the hook: so does everyone reading status.
	time.Sleep(2 * time.Second)
	hookRunning := sampler.snapshot()
	operatortest.EndJob(t, hook.Namespace, hook.Name, true)

	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		g.Expect(env.Status.Component("app").Release.Revision).To(Equal(2))
	})
	// The sampler reads every 50 ms: one more read after the one above
	// saw Ready, so its last sample is of the final status.
	time.Sleep(150 * time.Millisecond)
	samples := sampler.stop()
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)

	// Between the hook appearing and the snapshot, the upgrade was under
	// way.
	var during []kstatusSample
	for _, s := range hookRunning {
		if s.at.After(hookSeen) {
			during = append(during, s)
		}
	}
	g.Expect(during).NotTo(BeEmpty())
	for _, s := range during {
		g.Expect(s.status).NotTo(Equal(status.CurrentStatus), "kstatus read Current mid-upgrade at %s: %s", s.at.Format(time.StampMilli), s.message)
		g.Expect(s.ready).NotTo(Equal(metav1.ConditionTrue), "Ready mid-upgrade at %s", s.at.Format(time.StampMilli))
	}
	g.Expect(samples[len(samples)-1].status).To(Equal(status.CurrentStatus))
}

type kstatusSample struct {
	at      time.Time
	status  status.Status
	ready   metav1.ConditionStatus
	message string
}

type kstatusSampler struct {
	mu      sync.Mutex
	samples []kstatusSample
	done    chan struct{}
	stopped chan struct{}
}

// sampleKstatus reads the environment every 50 ms and computes its
// kstatus, as an independent reader would, until stopped.
func sampleKstatus(t *testing.T, key client.ObjectKey) *kstatusSampler {
	t.Helper()
	s := &kstatusSampler{done: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(s.stopped)
		for {
			select {
			case <-s.done:
				return
			case <-time.After(50 * time.Millisecond):
			}
			env := &v1alpha1.DevEnvironment{}
			if err := operatortest.Admin.Get(context.Background(), key, env); err != nil {
				continue
			}
			res, err := testenv.Kstatus(env)
			if err != nil {
				continue
			}
			sample := kstatusSample{at: time.Now(), status: res.Status, message: res.Message, ready: metav1.ConditionUnknown}
			if c := operatortest.EnvCondition(env, v1alpha1.ConditionReady); c != nil {
				sample.ready = c.Status
			}
			s.mu.Lock()
			s.samples = append(s.samples, sample)
			s.mu.Unlock()
		}
	}()
	return s
}

func (s *kstatusSampler) snapshot() []kstatusSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]kstatusSample(nil), s.samples...)
}

func (s *kstatusSampler) stop() []kstatusSample {
	close(s.done)
	<-s.stopped
	return s.snapshot()
}

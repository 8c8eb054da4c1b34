package build_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// TestARegistryDownIsWaitedForNotAnError (issue 43 items 1 and 2): the
// registry answers 503 to every push of one environment; the environment
// waits (Ready False, reason Waiting, kstatus InProgress) with a Normal
// Waiting event, no ReconcileError event and no ERROR log line — a wait
// is nothing an operator of the operator must act on — and once the
// registry answers again it is Ready with no help. A second environment
// in another namespace, on the same registry, is never touched.
func TestARegistryDownIsWaitedForNotAnError(t *testing.T) {
	g := NewWithT(t)
	ns, other := webNamespace(t), webNamespace(t)
	operatortest.Registry.SetFault(func(r *http.Request) int {
		if strings.HasPrefix(r.URL.Path, "/v2/"+ns+"/web/") {
			return http.StatusServiceUnavailable
		}
		return 0
	})
	t.Cleanup(func() { operatortest.Registry.SetFault(nil) })
	key := operatortest.CreateEnv(t, operatortest.WebEnv(ns))
	otherKey := operatortest.CreateEnv(t, operatortest.WebEnv(other))

	env := operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		ready := operatortest.EnvCondition(env, v1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).To(Equal(v1alpha1.ReasonWaiting), ready.Message)
	})
	operatortest.ExpectKstatus(t, env, status.InProgressStatus)
	fmt.Println("while the registry is down:", env.Status.Summary)
	operatortest.ExpectEvent(t, ns, v1alpha1.ReasonWaiting, "")
	operatortest.WaitForEnv(t, otherKey, operatortest.ExpectReadyAndCurrent)

	// It stays waiting, retried on its schedule, for a while: every retry
	// fails the same way.
	waitingSince := time.Now()
	g.Eventually(func(g Gomega) {
		g.Expect(operatortest.Admin.Get(context.Background(), key, env)).To(Succeed())
		g.Expect(operatortest.EnvCondition(env, v1alpha1.ConditionReady).Reason).To(Equal(v1alpha1.ReasonWaiting))
		g.Expect(time.Since(waitingSince)).To(BeNumerically(">", 8*time.Second), "still waiting")
	}, time.Minute, time.Second).Should(Succeed())

	operatortest.Registry.SetFault(nil)
	returned := time.Now()
	// Generous: the schedule looks again at most 30 s after the last try.
	g.Eventually(func(g Gomega) {
		g.Expect(operatortest.Admin.Get(context.Background(), key, env)).To(Succeed())
		operatortest.ExpectReadyAndCurrent(g, env)
	}, 90*time.Second, 200*time.Millisecond).Should(Succeed())
	fmt.Printf("Ready %s after the registry's return\n", time.Since(returned).Round(100*time.Millisecond))
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)
	// The Succeeded event is sent after any event of the waits before it.
	operatortest.ExpectEvent(t, ns, v1alpha1.ReasonSucceeded, "")

	list := &eventsv1.EventList{}
	g.Expect(operatortest.Admin.List(context.Background(), list, client.InNamespace(ns))).To(Succeed())
	for _, e := range list.Items {
		g.Expect(e.Reason).NotTo(Equal(v1alpha1.ReasonReconcileError), "event: %s", e.Note)
	}
	g.Expect(operatortest.ErrorLogLines(ns)).To(BeEmpty(), "ERROR lines logged for a waiting environment")
}

package testrun_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/builder"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// TestEveryRunStartAndEndIsItsOwnEvent (issue 43 item 4): one trigger
// starts three suites; each start, and each end, is an event of its own.
// The events API merges events of one object with the same reason into a
// series whatever their notes say: three TestStarted events showed as one
// "fast #1 started" with a count of 2, and the third never appeared.
func TestEveryRunStartAndEndIsItsOwnEvent(t *testing.T) {
	ns := operatortest.Namespace(t)
	env := operatortest.TestsEnv(t, ns, builder.Suite("fast"), builder.Suite("slow"), builder.Suite("lint")).Create(t, operatortest.Admin)
	operatortest.Annotate(t, env, v1alpha1.TriggerAnnotation, "all")
	suites := []string{"fast", "slow", "lint"}
	var jobs []string
	for _, s := range suites {
		_, run := operatortest.ExpectRun(t, env, s, 1, v1alpha1.ResultRunning)
		jobs = append(jobs, run.JobName)
	}
	expectOneEventPerRun(t, ns, v1alpha1.ReasonTestStarted, suites)

	for _, name := range jobs {
		operatortest.EndTestJob(t, operatortest.WaitForJob(t, ns, name), 0, "", "ok\n")
	}
	for _, s := range suites {
		operatortest.ExpectRun(t, env, s, 1, v1alpha1.ResultPassed)
	}
	expectOneEventPerRun(t, ns, v1alpha1.ReasonTestPassed, suites)
}

// expectOneEventPerRun waits until ns holds, for each suite's run #1, an
// event of reason whose note names it, each counted once (no series).
func expectOneEventPerRun(t *testing.T, ns, reason string, suites []string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		list := &eventsv1.EventList{}
		g.Expect(operatortest.Admin.List(context.Background(), list, client.InNamespace(ns))).To(Succeed())
		bySuite := map[string]int32{}
		for _, e := range list.Items {
			if e.Reason != reason {
				continue
			}
			count := int32(1)
			if e.Series != nil {
				count = e.Series.Count
			}
			for _, s := range suites {
				if len(e.Note) > len(s)+3 && e.Note[:len(s)+3] == s+" #1" {
					bySuite[s] += count
				}
			}
		}
		for _, s := range suites {
			g.Expect(bySuite).To(HaveKeyWithValue(s, int32(1)), "one %s event for %s #1", reason, s)
		}
	}, operatortest.Timeout).Should(Succeed())
}

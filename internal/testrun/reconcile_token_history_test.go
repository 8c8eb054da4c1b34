package testrun_test

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/builder"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// TestOlderTokenNeverRunsAgain: a GitOps revert re-applies `unit@t1`
// after `unit@t2`. Each token ran once; the old one coming back starts
// nothing and says so in an event (that event, not a sleep, is what the
// test waits for before looking at the runs); a new token still runs.
func TestOlderTokenNeverRunsAgain(t *testing.T) {
	g := NewWithT(t)
	env := operatortest.ReadyTestsEnv(t, builder.Suite("unit"))
	ns, key := env.Namespace, client.ObjectKeyFromObject(env)

	operatortest.Annotate(t, env, v1alpha1.TriggerAnnotation, "unit@t1")
	operatortest.ExpectRun(t, env, "unit", 1, v1alpha1.ResultRunning)
	operatortest.AnnotateOverwrite(t, key, v1alpha1.TriggerAnnotation, "unit@t2")
	env, _ = operatortest.ExpectRun(t, env, "unit", 2, v1alpha1.ResultPending)
	g.Expect(env.Status.HandledTriggerTokens).To(HaveLen(2))
	g.Expect(env.Status.HandledTriggerTokens[0]).To(Equal("trigger=unit@t2"))
	g.Expect(env.Status.HandledTriggerTokens[1]).To(MatchRegexp(`^trigger#[0-9a-f]{16}$`), "t1, remembered")

	// The revert.
	operatortest.AnnotateOverwrite(t, key, v1alpha1.TriggerAnnotation, "unit@t1")
	operatortest.ExpectEvent(t, ns, v1alpha1.ReasonTokenAlreadyHandled, "trigger=unit@t1: this token was handled before")
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.HandledTriggerTokens).To(HaveExactElements("trigger=unit@t1", MatchRegexp(`^trigger#`)))
	})
	g.Expect(operatortest.RunNumbers(env, "unit")).To(Equal([]int64{2, 1}), "no run for the old token")
	g.Expect(operatortest.RunOf(env, "unit", 2).Requests).To(Equal(int32(1)), "nor a request joining the queued run")
	g.Expect(env.Status.LastHandledTrigger).To(Equal("unit@t2"))

	// A reconcile later the old token is still not run, nor reported again.
	request := operatortest.RequestReconcile(t, env)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.LastHandledReconcileAt).To(Equal(request))
	})
	g.Expect(operatortest.RunNumbers(env, "unit")).To(Equal([]int64{2, 1}))
	g.Expect(eventsWith(g, ns, v1alpha1.ReasonTokenAlreadyHandled)).To(HaveExactElements(HaveSuffix("(x1)")), "said once")

	// t2 back again is old too; t3 is new and is handled.
	operatortest.AnnotateOverwrite(t, key, v1alpha1.TriggerAnnotation, "unit@t3")
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(operatortest.RunOf(env, "unit", 2).Requests).To(Equal(int32(2)), "t3 joins the queued run")
	})
	g.Expect(env.Status.LastHandledTrigger).To(Equal("unit@t3"))
}

// TestEveryConsumedTriggerIsAnEvent: a plain trigger, a token trigger and
// one naming an unknown suite each leave an event saying what became of
// the value, so a script (or a person) can tell which of several raw
// annotations written at once the operator saw.
func TestEveryConsumedTriggerIsAnEvent(t *testing.T) {
	env := operatortest.ReadyTestsEnv(t, builder.Suite("unit"))
	ns, key := env.Namespace, client.ObjectKeyFromObject(env)

	operatortest.Annotate(t, env, v1alpha1.TriggerAnnotation, "unit")
	operatortest.ExpectEvent(t, ns, v1alpha1.ReasonTriggerAccepted, "trigger=unit: unit #1 queued")
	operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Annotations).NotTo(HaveKey(v1alpha1.TriggerPendingAnnotation))
	})
	operatortest.Annotate(t, env, v1alpha1.TriggerAnnotation, "nope")
	operatortest.ExpectEvent(t, ns, v1alpha1.ReasonUnknownTestSuite, `trigger "nope": no test suite named "nope"`)
	operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Annotations).NotTo(HaveKey(v1alpha1.TriggerAnnotation))
		g.Expect(env.Annotations).NotTo(HaveKey(v1alpha1.TriggerPendingAnnotation))
	})
	operatortest.Annotate(t, env, v1alpha1.TriggerAnnotation, "unit@v1")
	operatortest.ExpectEvent(t, ns, v1alpha1.ReasonTriggerAccepted, "trigger=unit@v1: unit #2 queued")
}

// eventsWith are the notes of the events in ns with reason, each with
// how many times it was recorded.
func eventsWith(g Gomega, ns, reason string) []string {
	list := &eventsv1.EventList{}
	g.Expect(operatortest.Admin.List(context.Background(), list, client.InNamespace(ns))).To(Succeed())
	var notes []string
	for _, e := range list.Items {
		if e.Reason == reason {
			count := int32(1)
			if e.Series != nil {
				count = e.Series.Count // the recorder's repeats of one note
			}
			notes = append(notes, fmt.Sprintf("%s (x%d)", e.Note, count))
		}
	}
	return notes
}

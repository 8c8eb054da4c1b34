package testrun_test

import (
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testrun"
	"github.com/devloop-dev/devloop/test/builder"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// TestTriggerForms walks the trigger grammar through the operator: a
// list under the prefixed key, a label, all, an unknown name, a token left
// in place, cancel:all. Requests for a suite that already has a queued run
// join it.
func TestTriggerForms(t *testing.T) {
	g := NewWithT(t)
	ns := operatortest.Namespace(t)
	env := operatortest.TestsEnv(t, ns, builder.Suite("a", "x"), builder.Suite("b", "x"), builder.Suite("c")).Create(t, operatortest.Admin)
	key := client.ObjectKeyFromObject(env)

	// A comma list under the prefixed key.
	operatortest.Annotate(t, env, v1alpha1.TriggerAnnotationPrefixed, "a,b")
	operatortest.ExpectRun(t, env, "a", 1, v1alpha1.ResultRunning)
	env, _ = operatortest.ExpectRun(t, env, "b", 1, v1alpha1.ResultRunning)
	g.Expect(operatortest.RunNumbers(env, "c")).To(BeEmpty())
	g.Expect(env.Status.LastHandledTrigger).To(Equal("a,b"))

	// A label: both labelled suites queue behind their running runs.
	operatortest.Annotate(t, env, v1alpha1.TriggerAnnotation, "label:x")
	env, run := operatortest.ExpectRun(t, env, "a", 2, v1alpha1.ResultPending)
	g.Expect(run.Message).To(Equal("queued behind run #1"))
	g.Expect(env.Status.Test("a").Message).To(Equal("run #2 is queued behind run #1"))
	operatortest.ExpectRun(t, env, "b", 2, v1alpha1.ResultPending)

	// all: a and b have a queued run, which now answers two requests; c
	// starts.
	operatortest.Annotate(t, env, v1alpha1.TriggerAnnotation, "all")
	env, _ = operatortest.ExpectRun(t, env, "c", 1, v1alpha1.ResultRunning)
	g.Expect(operatortest.RunOf(env, "a", 2).Requests).To(Equal(int32(2)))
	g.Expect(operatortest.RunOf(env, "b", 2).Requests).To(Equal(int32(2)))
	g.Expect(operatortest.EnvCondition(env, v1alpha1.ConditionTriggerHandled).Message).To(ContainSubstring("c #1 queued"))

	// An unknown name: nothing changes but a False TriggerHandled listing
	// the suites, a Warning event, and the annotation is taken so the next
	// (correct) request can be made.
	before := env.Status.Tests
	operatortest.Annotate(t, env, v1alpha1.TriggerAnnotation, "a,nope")
	env = operatortest.WaitForTriggerRefused(t, key, v1alpha1.ReasonUnknownTestSuite, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Annotations).NotTo(HaveKey(v1alpha1.TriggerAnnotation))
		g.Expect(env.Annotations).NotTo(HaveKey(v1alpha1.TriggerPendingAnnotation))
	})
	g.Expect(operatortest.EnvCondition(env, v1alpha1.ConditionTriggerHandled).Message).To(Equal(
		`trigger "a,nope": no test suite named "nope"; nothing was started or cancelled. Suites: a, b, c`))
	g.Expect(env.Status.Tests).To(Equal(before), "an unknown name changes nothing else")
	operatortest.ExpectEvent(t, ns, v1alpha1.ReasonUnknownTestSuite, `no test suite named "nope"`)
	operatortest.ExpectReadyCurrent(t, env)

	// A token trigger is handled once and left in place: reconciles after
	// it (here: a reconcile request) do not repeat it; a new token does.
	operatortest.Annotate(t, env, v1alpha1.TriggerAnnotation, "c@v1")
	env, _ = operatortest.ExpectRun(t, env, "c", 2, v1alpha1.ResultPending)
	g.Expect(env.Annotations).To(HaveKeyWithValue(v1alpha1.TriggerAnnotation, "c@v1"))
	g.Expect(env.Status.HandledTriggerTokens).To(Equal([]string{"trigger=c@v1"}))
	request := operatortest.RequestReconcile(t, env)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.LastHandledReconcileAt).To(Equal(request))
	})
	g.Expect(operatortest.RunOf(env, "c", 2).Requests).To(Equal(int32(1)), "a token is handled once")
	// The token form is always there: a new token overwrites the old.
	operatortest.AnnotateOverwrite(t, key, v1alpha1.TriggerAnnotation, "c@v2")
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(operatortest.RunOf(env, "c", 2).Requests).To(Equal(int32(2)))
	})

	// cancel:all ends everything running or queued.
	operatortest.Annotate(t, env, v1alpha1.TriggerAnnotationPrefixed, "cancel:all")
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		for _, s := range []string{"a", "b", "c"} {
			for _, r := range env.Status.Test(s).Runs {
				g.Expect(r.Result).To(Equal(v1alpha1.ResultCancelled), "%s #%d", s, r.Number)
			}
		}
		g.Expect(operatortest.TestJobNames(g, ns)).To(BeEmpty())
	})
	g.Expect(operatortest.RunOf(env, "a", 2).Message).To(Equal("cancelled by devloop.dev/trigger=cancel:all before it started"))
	operatortest.ExpectReadyCurrent(t, env)
}

// TestConcurrentTriggersAreEachRecordedOnce has many clients annotate at
// once, each as `kubectl annotate` does (refused while the key is there,
// optimistic concurrency on write). Every call that succeeded must be
// recorded exactly once: the requests recorded on the runs add up to the
// number of successful calls.
func TestConcurrentTriggersAreEachRecordedOnce(t *testing.T) {
	g := NewWithT(t)
	env := operatortest.ReadyTestsEnv(t, builder.Suite("unit"))
	ns, key := env.Namespace, client.ObjectKeyFromObject(env)

	const clients, calls = 6, 4
	var succeeded atomic.Int32
	var wg sync.WaitGroup
	start := time.Now()
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < calls; i++ {
				if err := operatortest.TryAnnotate(key, v1alpha1.TriggerAnnotation, "unit", 2*operatortest.Timeout); err == nil {
					succeeded.Add(1)
				} else {
					t.Log("annotate:", err)
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d of %d annotate calls succeeded in %s", succeeded.Load(), clients*calls, time.Since(start).Round(time.Millisecond))
	g.Expect(succeeded.Load()).To(BeNumerically(">", 1))

	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Annotations).NotTo(HaveKey(v1alpha1.TriggerAnnotation))
		g.Expect(env.Annotations).NotTo(HaveKey(v1alpha1.TriggerPendingAnnotation))
		var requests int32
		for _, r := range env.Status.Test("unit").Runs {
			requests += r.Requests
		}
		g.Expect(requests).To(Equal(succeeded.Load()), "requests recorded")
	})
	// One run started; every later request joined the one queued run.
	g.Expect(operatortest.RunNumbers(env, "unit")).To(Equal([]int64{2, 1}))
	g.Expect(operatortest.TestJobNames(NewWithT(t), ns)).To(ConsistOf("tests-unit-1"))
	operatortest.ExpectReadyCurrent(t, env)
}

// TestPendingTriggerSurvivesACrash plays the operator stopping between
// the writes of the trigger protocol: a pending request whose id status
// already holds is only removed; one it does not hold is recorded once.
func TestPendingTriggerSurvivesACrash(t *testing.T) {
	g := NewWithT(t)
	ns := operatortest.Namespace(t)
	env := operatortest.TestsEnv(t, ns, builder.Suite("unit")).Create(t, operatortest.Admin)
	key := client.ObjectKeyFromObject(env)
	operatortest.Annotate(t, env, v1alpha1.TriggerAnnotation, "unit")
	env, _ = operatortest.ExpectRun(t, env, "unit", 1, v1alpha1.ResultRunning)
	recorded := env.Status.LastHandledTriggerID
	g.Expect(recorded).NotTo(BeEmpty())

	setPending := func(id string) {
		raw, err := json.Marshal(testrun.Pending{ID: id, Key: v1alpha1.TriggerAnnotation, Value: "unit"})
		g.Expect(err).NotTo(HaveOccurred())
		operatortest.AnnotateOverwrite(t, key, v1alpha1.TriggerPendingAnnotation, string(raw))
	}

	// Stopped after recording, before removing: removed, nothing added.
	setPending(recorded)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Annotations).NotTo(HaveKey(v1alpha1.TriggerPendingAnnotation))
	})
	g.Expect(operatortest.RunNumbers(env, "unit")).To(Equal([]int64{1}))
	g.Expect(operatortest.RunOf(env, "unit", 1).Requests).To(Equal(int32(1)))

	// Stopped after taking, before recording: recorded once.
	setPending("999999999")
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Annotations).NotTo(HaveKey(v1alpha1.TriggerPendingAnnotation))
		g.Expect(env.Status.LastHandledTriggerID).To(Equal("999999999"))
	})
	g.Expect(operatortest.RunNumbers(env, "unit")).To(Equal([]int64{2, 1}))
	g.Expect(operatortest.RunOf(env, "unit", 2).Requests).To(Equal(int32(1)))
	operatortest.ExpectReadyCurrent(t, env)
}

// TestOversizedTokenTrigger: a token trigger longer than a trigger may be
// (one that would not fit status.handledTriggerTokens, failing every
// status write) is refused naming the annotation and its length, recorded
// as handled, and status writes go on: a reconcile request is acted on,
// and the next token trigger runs.
func TestOversizedTokenTrigger(t *testing.T) {
	g := NewWithT(t)
	env := operatortest.ReadyTestsEnv(t, builder.Suite("c"))
	ns, key := env.Namespace, client.ObjectKeyFromObject(env)

	huge := "c@" + strings.Repeat("x", 1200)
	operatortest.Annotate(t, env, v1alpha1.TriggerAnnotation, huge)
	env = operatortest.WaitForTriggerRefused(t, key, v1alpha1.ReasonInvalidTrigger, func(g Gomega, env *v1alpha1.DevEnvironment) {
		c := operatortest.EnvCondition(env, v1alpha1.ConditionTriggerHandled)
		g.Expect(c.Message).To(Equal("annotation trigger holds 1202 bytes; a trigger may have at most 1024: it is ignored"))
		g.Expect(env.Status.HandledTriggerTokens).To(HaveLen(1))
		g.Expect(env.Status.HandledTriggerTokens[0]).To(HavePrefix("trigger=sha256:"))
	})
	operatortest.ExpectEvent(t, ns, v1alpha1.ReasonInvalidTrigger, "annotation trigger holds 1202 bytes")
	g.Expect(testrun.Unconsumed(env)).To(BeEmpty(), "the plugin sees it consumed")

	request := operatortest.RequestReconcile(t, env)
	operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.LastHandledReconcileAt).To(Equal(request), "status writes go on")
	})
	operatortest.AnnotateOverwrite(t, key, v1alpha1.TriggerAnnotation, "c@v1")
	operatortest.ExpectRun(t, env, "c", 1, v1alpha1.ResultRunning)
}

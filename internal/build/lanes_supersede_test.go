package build

import (
	"context"
	"io"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// TestSupersededWarmBuildHandsItsLaneToItsSuccessor: a warm build whose
// inputs change while it compiles (a spec edit) is superseded: its exec
// streams close at once, but its processes compile on in the pod until
// the next build's claim there kills them. Seen on Volcano's real tree:
// the controller-manager's superseded build gave its lane up when its
// streams closed, the scheduler's build (queued for the lane) took it and
// compiled beside the controller-manager's processes, whose successor
// queued behind it. The lane must pass to the successor in the same pod,
// whose claim comes next; the other image's build only after that.
func TestSupersededWarmBuildHandsItsLaneToItsSuccessor(t *testing.T) {
	g := NewWithT(t)
	w := newWarmBuilds()
	lane := laneOf("a", "volcano-src-1234-gocache", "linux/amd64")
	env := &v1alpha1.DevEnvironment{}
	env.Namespace, env.Name = "a", "volcano"

	var mu sync.Mutex
	var claims []string
	claimed := make(chan string, 8)
	// The claim records who claimed, then stands for the compile: it runs
	// until its streams are closed (superseded) or, for the later builds,
	// ends at once.
	execFor := func(who string, compiles bool) func(context.Context, WarmStep, io.Writer, io.Writer) error {
		return func(ctx context.Context, _ WarmStep, _, _ io.Writer) error {
			mu.Lock()
			claims = append(claims, who)
			mu.Unlock()
			claimed <- who
			if compiles {
				<-ctx.Done()
				return ctx.Err()
			}
			return context.Canceled
		}
	}
	plan := func(image, pod string) warmPlan {
		return warmPlan{claim: WarmStep{Name: WarmStepClaim}, lane: lane, holder: "image " + image,
			image: image, builder: "a/" + pod, timeout: time.Minute}
	}
	first := w.start("cm-pod/inputs-1", "cm-pod", env, plan("vc-controller-manager", "cm-warm"), execFor("controller-manager 1", true))
	g.Expect(<-claimed).To(Equal("controller-manager 1"))
	sched := w.start("sched-pod/inputs-1", "sched-pod", env, plan("vc-scheduler", "sched-warm"), execFor("scheduler", false))
	g.Eventually(func() bool { _, queued := sched.waitingForLane(); return queued }).WithTimeout(time.Minute).Should(BeTrue(), "the scheduler's build queued for the lane")

	// The controller-manager's inputs change: its build is superseded.
	second := w.start("cm-pod/inputs-2", "cm-pod", env, plan("vc-controller-manager", "cm-warm"), execFor("controller-manager 2", false))
	for _, r := range []*warmRun{first, second, sched} {
		g.Eventually(r.finished).WithTimeout(time.Minute).Should(BeTrue())
	}
	mu.Lock()
	defer mu.Unlock()
	g.Expect(claims).To(Equal([]string{"controller-manager 1", "controller-manager 2", "scheduler"}),
		"the superseded build's successor claims its pod (killing its processes) before another image's build may compile")
	g.Expect(w.lanes.held).To(BeEmpty(), "lanes left held")
}

package v1alpha1

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// refsOf are n references of the given name length.
func refsOf(n, nameLen int) []ObjectRef {
	out := make([]ObjectRef, n)
	for i := range out {
		out[i] = ObjectRef{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "ns", Name: fmt.Sprintf("%0*d", nameLen, i)}
	}
	return out
}

func TestBoundCutsListsToTheirTotals(t *testing.T) {
	lines := func(n int) []string { return strings.Split(strings.Repeat("x,", n-1)+"x", ",") }
	s := DevEnvironmentStatus{
		Conditions: []metav1.Condition{{Type: ConditionReady, Message: strings.Repeat("m", 5000)}},
		Components: []ComponentStatus{
			{Name: "a", WaitingFor: lines(32), Drift: lines(10), Release: &ReleaseStatus{Workloads: refsOf(40, 10), MoreWorkloads: 3}},
			{Name: "b", WaitingFor: lines(32), Drift: lines(10), Release: &ReleaseStatus{Workloads: refsOf(40, 10)}},
			{Name: "c", WaitingFor: lines(5), Drift: lines(1), Release: &ReleaseStatus{Workloads: refsOf(5, 10)}},
		},
	}
	s.Bound()
	workloads, text, waiting, drift := 0, 0, 0, 0
	for _, c := range s.Components {
		workloads += len(c.Release.Workloads)
		for _, r := range c.Release.Workloads {
			text += r.TextSize()
		}
		waiting += len(c.WaitingFor)
		drift += len(c.Drift)
	}
	if workloads != MaxWorkloads || text > MaxWorkloadsText || waiting != MaxWaitingFor || drift != MaxDrift {
		t.Errorf("workloads %d (%d characters), waitingFor %d, drift %d; want %d (at most %d), %d, %d", workloads, text, waiting, drift, MaxWorkloads, MaxWorkloadsText, MaxWaitingFor, MaxDrift)
	}
	if a, b, c := s.Components[0].Release, s.Components[1].Release, s.Components[2].Release; a.MoreWorkloads != 3 || b.MoreWorkloads != 16 || c.MoreWorkloads != 5 || c.Workloads != nil {
		t.Errorf("more workloads: %d, %d, %d (c keeps %d); want 3 (the engine's count, nothing cut), 16, 5 (all cut)", a.MoreWorkloads, b.MoreWorkloads, c.MoreWorkloads, len(c.Workloads))
	}
	if n := len(s.Conditions[0].Message); n > MaxConditionMessage {
		t.Errorf("condition message: %d bytes, want at most %d", n, MaxConditionMessage)
	}
	// A status within its totals is left as it is: Bound twice counts
	// nothing twice, so a no-op reconcile writes nothing.
	again := *s.DeepCopy()
	again.Bound()
	if !reflect.DeepEqual(again, s) {
		t.Errorf("a second Bound changed the status")
	}
}

func TestBoundCutsWorkloadsToTheirText(t *testing.T) {
	s := DevEnvironmentStatus{Components: []ComponentStatus{{Name: "a", Release: &ReleaseStatus{Workloads: refsOf(40, 240)}}}}
	s.Bound()
	rel := s.Components[0].Release
	text := 0
	for _, r := range rel.Workloads {
		text += r.TextSize()
	}
	if text > MaxWorkloadsText || len(rel.Workloads)+int(rel.MoreWorkloads) != 40 || rel.MoreWorkloads == 0 {
		t.Errorf("%d workloads of %d characters, %d more; want at most %d characters and the rest counted", len(rel.Workloads), text, rel.MoreWorkloads, MaxWorkloadsText)
	}
}

func TestInventorySizeLeavesOneComponentOut(t *testing.T) {
	s := DevEnvironmentStatus{Components: []ComponentStatus{{Name: "a", Inventory: refsOf(3, 5)}, {Name: "b", Inventory: refsOf(2, 5)}}}
	objects, text := s.InventorySize("a")
	if objects != 2 || text != 2*(4+2+10+2+5) {
		t.Errorf("InventorySize without a: %d objects, %d characters; want 2, %d", objects, text, 2*(4+2+10+2+5))
	}
}

// Component messages share one total: when all of them would pass it, the
// long ones are cut to an equal share of what the short ones leave, each
// keeping its start, and the short ones stay whole.
func TestBoundCutsComponentMessagesToTheirTotal(t *testing.T) {
	var s DevEnvironmentStatus
	for i := range 32 {
		s.Components = append(s.Components, ComponentStatus{Name: fmt.Sprintf("c%d", i), Message: fmt.Sprintf("c%d: ", i) + strings.Repeat("m", 2000)})
	}
	s.Components[3].Message = "ready"
	s.Bound()
	total := 0
	for i, c := range s.Components {
		total += len(c.Message)
		if i != 3 && (!strings.HasPrefix(c.Message, fmt.Sprintf("c%d: m", i)) || !strings.HasSuffix(c.Message, "...")) {
			t.Errorf("components[%d].message %.20q…%q: want its start kept and the cut marked", i, c.Message, c.Message[max(0, len(c.Message)-5):])
		}
	}
	if total > MaxComponentMessages {
		t.Errorf("component messages: %d characters together, want at most %d", total, MaxComponentMessages)
	}
	if s.Components[3].Message != "ready" {
		t.Errorf("a short message was cut: %q", s.Components[3].Message)
	}
	again := *s.DeepCopy()
	again.Bound()
	if !reflect.DeepEqual(again, s) {
		t.Errorf("a second Bound changed the messages")
	}
}

package controllers

import (
	"errors"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/internal/message"
)

// TestSummaryIsTheShortReadyMessage (issue 43 item 3): the STATUS column
// (status.summary) is Ready's message in at most 120 bytes; the condition
// keeps the whole message.
func TestSummaryIsTheShortReadyMessage(t *testing.T) {
	g := NewWithT(t)
	digest := "sha256:" + strings.Repeat("ab", 32)
	long := "component operator: pod operator-1: container manager: ImagePullBackOff: " +
		strings.Repeat(`failed to pull "localhost:5001/team-a/controller@`+digest+`": `, 3) + "not found"
	env := &v1alpha1.DevEnvironment{}
	env.Spec.Components = []v1alpha1.Component{{Name: "operator"}}
	summarize(env, fault.Stalled(v1alpha1.ReasonDeployFailed, errors.New(long)))
	ready := meta.FindStatusCondition(env.Status.Conditions, v1alpha1.ConditionReady)
	g.Expect(ready.Message).To(Equal(long), "the condition keeps it whole")
	g.Expect(len(env.Status.Summary)).To(BeNumerically("<=", message.MaxSummary))
	g.Expect(env.Status.Summary).To(HavePrefix("component operator"))
	g.Expect(env.Status.Summary).To(ContainSubstring("not found"))

	summarize(env, nil)
	g.Expect(env.Status.Summary).To(Equal("1/1 components ready"))
}

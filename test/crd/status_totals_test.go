package crd

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testrun"
)

// statusTotal is one total per environment on the status: a status at
// the total (over=false) and one past it (over=true), the rule's message,
// and how the operator brings an over-full status back (nil where the
// engine refuses to write it instead: an inventory is never cut).
type statusTotal struct {
	status  func(over bool) v1alpha1.DevEnvironmentStatus
	message string
	fit     func(*v1alpha1.DevEnvironmentStatus)
}

func bound(s *v1alpha1.DevEnvironmentStatus) { s.Bound() }

func fitHistory(s *v1alpha1.DevEnvironmentStatus) { testrun.FitHistory(s.Tests) }

var statusTotals = map[string]statusTotal{
	"images": {
		status: func(over bool) v1alpha1.DevEnvironmentStatus {
			return withComponents(spread(v1alpha1.MaxStatusImages, over, 8), func(c *v1alpha1.ComponentStatus, n int) {
				for i := range n {
					c.Images = append(c.Images, v1alpha1.ImageStatus{Name: fmt.Sprintf("%s-image-%d", c.Name, i)})
				}
			})
		},
		message: "at most 16 images (components[].images)",
	},
	"component messages": {
		status: func(over bool) v1alpha1.DevEnvironmentStatus {
			return withComponents(spread(v1alpha1.MaxComponentMessages, over, v1alpha1.MaxComponentMessage), func(c *v1alpha1.ComponentStatus, n int) {
				c.Message = strings.Repeat("m", n)
			})
		},
		message: "at most 16384 characters of messages (components[].message)",
		fit:     bound,
	},
	"inventory objects": {
		status: func(over bool) v1alpha1.DevEnvironmentStatus {
			return withComponents(spread(v1alpha1.MaxInventory, over, 200), func(c *v1alpha1.ComponentStatus, n int) {
				c.Inventory = refs(c.Name, n, 8)
			})
		},
		message: "at most 256 objects (components[].inventory)",
	},
	"inventory text": {
		status: func(over bool) v1alpha1.DevEnvironmentStatus {
			return withComponents(spread(v1alpha1.MaxInventoryText/refText, over, 50), func(c *v1alpha1.ComponentStatus, n int) {
				c.Inventory = refs(c.Name, n, refText)
			})
		},
		message: "at most 24576 characters of object names (components[].inventory",
	},
	"workloads": {
		status: func(over bool) v1alpha1.DevEnvironmentStatus {
			return withComponents(spread(v1alpha1.MaxWorkloads, over, 40), func(c *v1alpha1.ComponentStatus, n int) {
				c.Release = &v1alpha1.ReleaseStatus{Name: c.Name, Namespace: "default", Workloads: refs(c.Name, n, 8)}
			})
		},
		message: "at most 64 workloads (components[].release.workloads)",
		fit:     bound,
	},
	"workloads text": {
		status: func(over bool) v1alpha1.DevEnvironmentStatus {
			return withComponents(spread(v1alpha1.MaxWorkloadsText/refText, over, 20), func(c *v1alpha1.ComponentStatus, n int) {
				c.Release = &v1alpha1.ReleaseStatus{Name: c.Name, Namespace: "default", Workloads: refs(c.Name, n, refText)}
			})
		},
		message: "at most 8192 characters of workload names",
		fit:     bound,
	},
	"waitingFor": {
		status: func(over bool) v1alpha1.DevEnvironmentStatus {
			return withComponents(spread(v1alpha1.MaxWaitingFor, over, 30), func(c *v1alpha1.ComponentStatus, n int) {
				for i := range n {
					c.WaitingFor = append(c.WaitingFor, fmt.Sprintf("dep-%d", i))
				}
			})
		},
		message: "at most 64 waitingFor entries",
		fit:     bound,
	},
	"drift": {
		status: func(over bool) v1alpha1.DevEnvironmentStatus {
			return withComponents(spread(v1alpha1.MaxDrift, over, 10), func(c *v1alpha1.ComponentStatus, n int) {
				for i := range n {
					c.Drift = append(c.Drift, fmt.Sprintf("deployments.apps/web-%d: spec.replicas changed by hand", i))
				}
			})
		},
		message: "at most 16 drift lines",
		fit:     bound,
	},
	"runs": {
		status: func(over bool) v1alpha1.DevEnvironmentStatus {
			return withRuns(spread(v1alpha1.MaxRuns, over, 10), func(*v1alpha1.TestRun) {})
		},
		message: "at most 32 test runs (tests[].runs)",
		fit:     fitHistory,
	},
	"log tails": {
		status: func(over bool) v1alpha1.DevEnvironmentStatus {
			return withRuns(spread(v1alpha1.MaxRunLogTails/v1alpha1.MaxRunLogTail, over, 3), func(r *v1alpha1.TestRun) {
				r.LogTail = strings.Repeat("x", v1alpha1.MaxRunLogTail-1) + "\n"
			})
		},
		message: "at most 16384 characters of log tails",
		fit:     fitHistory,
	},
	"result names": {
		status: func(over bool) v1alpha1.DevEnvironmentStatus {
			return withRuns(spread(v1alpha1.MaxResultNames/16, over, 1), func(r *v1alpha1.TestRun) {
				r.Results = &v1alpha1.TestResults{Failed: 16}
				for i := range 16 {
					r.Results.Failures = append(r.Results.Failures, fmt.Sprintf("TestThing%d", i))
				}
			})
		},
		message: "at most 32 test names",
		fit:     fitHistory,
	},
	"images under test": {
		status: func(over bool) v1alpha1.DevEnvironmentStatus {
			return withRuns(spread(v1alpha1.MaxRunImages/16, over, 3), func(r *v1alpha1.TestRun) {
				r.Images = map[string]string{}
				for i := range 16 {
					r.Images[fmt.Sprintf("image-%d", i)] = "sha256:" + strings.Repeat("d", 64)
				}
			})
		},
		message: "at most 96 images under test",
		fit:     fitHistory,
	},
	"params": {
		status: func(over bool) v1alpha1.DevEnvironmentStatus {
			return withRuns(spread(v1alpha1.MaxRunParams/8, over, 2), func(r *v1alpha1.TestRun) {
				for i := range 8 {
					r.Params = append(r.Params, v1alpha1.EnvVar{Name: fmt.Sprintf("P%d", i), Value: "v"})
				}
			})
		},
		message: "at most 32 params",
		fit:     fitHistory,
	},
	"condition message": {
		status: func(over bool) v1alpha1.DevEnvironmentStatus {
			n := v1alpha1.MaxConditionMessage
			if over {
				n++
			}
			return v1alpha1.DevEnvironmentStatus{Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse,
				Reason: "Failed", Message: strings.Repeat("m", n), LastTransitionTime: metav1.Now()}}}
		},
		message: "conditions: type at most 64 characters, reason 128, message 1024",
		fit:     bound,
	},
}

// TestStatusTotals writes, for each total per environment, a status at
// the total (accepted) and one past it (refused with the rule's message);
// where the operator cuts or trims to fit, the over-full status after that
// is accepted.
func TestStatusTotals(t *testing.T) {
	ctx := context.Background()
	for name, tc := range statusTotals {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			env := validEnv()
			env.Name = "totals-" + strings.ToLower(strings.ReplaceAll(name, " ", "-"))
			g.Expect(k8s.Create(ctx, env)).To(Succeed())
			t.Cleanup(func() { _ = k8s.Delete(ctx, env) })

			env.Status = tc.status(false)
			g.Expect(k8s.Status().Update(ctx, env)).To(Succeed(), "a status at the total")
			env.Status = tc.status(true)
			err := k8s.Status().Update(ctx, env)
			g.Expect(err).To(HaveOccurred(), "a status past the total")
			g.Expect(err.Error()).To(ContainSubstring(tc.message))
			if tc.fit == nil {
				return
			}
			tc.fit(&env.Status)
			g.Expect(k8s.Status().Update(ctx, env)).To(Succeed(), "the status once the operator fitted it")
		})
	}
}

// spread splits the total (one more when over) into lists of at most per
// items: what each component or suite holds.
func spread(total int, over bool, per int) []int {
	if over {
		total++
	}
	var out []int
	for total > 0 {
		n := min(total, per)
		out = append(out, n)
		total -= n
	}
	return out
}

func withComponents(counts []int, fill func(*v1alpha1.ComponentStatus, int)) v1alpha1.DevEnvironmentStatus {
	var s v1alpha1.DevEnvironmentStatus
	for i, n := range counts {
		c := v1alpha1.ComponentStatus{Name: fmt.Sprintf("c%d", i), Phase: v1alpha1.PhaseReady}
		fill(&c, n)
		s.Components = append(s.Components, c)
	}
	return s
}

// withRuns gives each suite its count of finished runs, the older the
// higher their suite's index, so trimming has an oldest to drop.
func withRuns(counts []int, fill func(*v1alpha1.TestRun)) v1alpha1.DevEnvironmentStatus {
	var s v1alpha1.DevEnvironmentStatus
	start := time.Now().Add(-time.Hour)
	for i, n := range counts {
		st := v1alpha1.TestStatus{Name: fmt.Sprintf("s%d", i)}
		for j := range n {
			at := metav1.NewTime(start.Add(-time.Duration(i*10+j) * time.Minute))
			r := v1alpha1.TestRun{Number: int64(n - j), Result: v1alpha1.ResultPassed, StartTime: &at, CompletionTime: &at}
			fill(&r)
			st.Runs = append(st.Runs, r)
		}
		s.Tests = append(s.Tests, st)
	}
	return s
}

// refText is the characters of one reference made by refs with a long
// name: kind ConfigMap, version v1, a 245-character name.
const refText = 256

// refs are n ConfigMap references of text characters each (at least 8).
func refs(prefix string, n, text int) []v1alpha1.ObjectRef {
	out := make([]v1alpha1.ObjectRef, n)
	for i := range out {
		name := fmt.Sprintf("%s-%d-", prefix, i)
		name += strings.Repeat("n", max(1, text-len("ConfigMap")-len("v1")-len(name)))
		out[i] = v1alpha1.ObjectRef{Version: "v1", Kind: "ConfigMap", Namespace: "", Name: name}
	}
	return out
}

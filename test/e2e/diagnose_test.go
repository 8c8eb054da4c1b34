//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// logNamespace logs, for a failed test, where its namespace stands: the
// environments' conditions, every pod, the Services' endpoints and the
// last events. A failure that is not reproduced (a Service that stopped
// answering in one run of five) is understood from this or not at all.
func logNamespace(t *testing.T, ns string) {
	t.Helper()
	c := need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var b strings.Builder
	envs := &v1alpha1.DevEnvironmentList{}
	if err := c.Client.List(ctx, envs, client.InNamespace(ns)); err == nil {
		for _, e := range envs.Items {
			fmt.Fprintf(&b, "environment %s (generation %d, observed %d):", e.Name, e.Generation, e.Status.ObservedGeneration)
			for _, cond := range e.Status.Conditions {
				fmt.Fprintf(&b, "\n  %s=%s %s: %s", cond.Type, cond.Status, cond.Reason, cond.Message)
			}
			b.WriteString("\n")
		}
	}
	b.WriteString(c.Diagnose(ns) + "\n")
	slices := &discoveryv1.EndpointSliceList{}
	if err := c.Client.List(ctx, slices, client.InNamespace(ns)); err == nil {
		for _, s := range slices.Items {
			fmt.Fprintf(&b, "endpoints of %s:", s.Labels[discoveryv1.LabelServiceName])
			for _, e := range s.Endpoints {
				ready := e.Conditions.Ready != nil && *e.Conditions.Ready
				pod := ""
				if e.TargetRef != nil {
					pod = e.TargetRef.Name
				}
				fmt.Fprintf(&b, " %v %s ready=%t;", e.Addresses, pod, ready)
			}
			b.WriteString("\n")
		}
	}
	events := &corev1.EventList{}
	if err := c.Client.List(ctx, events, client.InNamespace(ns)); err == nil {
		sort.Slice(events.Items, func(i, j int) bool { return eventTime(&events.Items[i]).Before(eventTime(&events.Items[j])) })
		items := events.Items
		if len(items) > 30 {
			items = items[len(items)-30:]
		}
		for _, e := range items {
			fmt.Fprintf(&b, "event %s %s %s/%s %s: %s (x%d)\n", eventTime(&e).Format("15:04:05.000"), e.Type,
				e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message, max(e.Count, 1))
		}
	}
	t.Logf("namespace %s at the failure:\n%s", ns, b.String())
}

func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

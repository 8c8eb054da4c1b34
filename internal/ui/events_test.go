package ui

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Events written through events.k8s.io (client-go's new recorder, the
// operator's) leave the core Event's count at 0 and count repeats in
// series: the page shows how many times it happened, and when last.
func TestEventViewCountsSeriesAndSingleEvents(t *testing.T) {
	first := time.Date(2026, 11, 28, 4, 0, 0, 0, time.UTC)
	latest := first.Add(3 * time.Minute)
	for _, c := range []struct {
		name      string
		ev        corev1.Event
		wantCount int32
		wantLast  time.Time
	}{
		{"core/v1, counted", corev1.Event{Count: 5, LastTimestamp: metav1.NewTime(latest)}, 5, latest},
		{"events.k8s.io, once", corev1.Event{EventTime: metav1.NewMicroTime(first)}, 1, first},
		{"events.k8s.io, a series", corev1.Event{EventTime: metav1.NewMicroTime(first), Series: &corev1.EventSeries{Count: 4, LastObservedTime: metav1.NewMicroTime(latest)}}, 4, latest},
	} {
		v := eventViewOf(&c.ev)
		if v.Count != c.wantCount || !v.Last.Equal(c.wantLast) {
			t.Errorf("%s: count %d, last %s; want %d, %s", c.name, v.Count, v.Last, c.wantCount, c.wantLast)
		}
	}
}

package testrun

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/engine"
)

// TestForgetRemovesOnlyTheEnvironmentsSeries: a deleted environment's
// run counters and durations go; another's, same-named in another
// namespace included, stay.
func TestForgetRemovesOnlyTheEnvironmentsSeries(t *testing.T) {
	for _, ns := range []string{"metrics-a", "metrics-b"} {
		RunsTotal.WithLabelValues(ns, "shop", "unit", "Passed").Inc()
		RunsTotal.WithLabelValues(ns, "shop", "e2e", "Failed").Inc()
		RunDuration.WithLabelValues(ns, "shop", "unit").Observe(3)
	}
	count := func() int {
		return testutil.CollectAndCount(RunsTotal) + testutil.CollectAndCount(RunDuration)
	}
	before := count()

	if err := (&Engine{}).Finalize(context.Background(), engine.Request{Env: &v1alpha1.DevEnvironment{ObjectMeta: metav1.ObjectMeta{Namespace: "metrics-a", Name: "shop"}}}); err != nil {
		t.Fatal(err)
	}
	if got, want := count(), before-3; got != want {
		t.Errorf("series after forgetting metrics-a/shop: %d, want %d", got, want)
	}
	if got := testutil.ToFloat64(RunsTotal.WithLabelValues("metrics-b", "shop", "unit", "Passed")); got != 1 {
		t.Errorf("metrics-b/shop's counter: %v, want 1", got)
	}
	ForgetMetrics("metrics-b", "shop")
	if got, want := count(), before-6; got != want {
		t.Errorf("series after forgetting both: %d, want %d", got, want)
	}
}

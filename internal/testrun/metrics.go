package testrun

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Test run metrics, served with controller-runtime's on the manager's
// metrics endpoint.
var (
	RunsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "devloop_test_runs_total",
		Help: "Test runs that ended, by suite and result (Passed, Failed, TimedOut, Cancelled, Error).",
	}, []string{"namespace", "environment", "suite", "result"})
	RunDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "devloop_test_run_duration_seconds",
		Help:    "How long test runs took, from their Job's creation to their end.",
		Buckets: []float64{5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200},
	}, []string{"namespace", "environment", "suite"})
)

func init() {
	metrics.Registry.MustRegister(RunsTotal, RunDuration)
}

// ForgetMetrics removes every series of the environment namespace/name,
// so a deleted environment's series do not stay on the metrics endpoint
// for the operator's lifetime. It returns how many were removed.
func ForgetMetrics(namespace, name string) int {
	labels := prometheus.Labels{"namespace": namespace, "environment": name}
	return RunsTotal.DeletePartialMatch(labels) + RunDuration.DeletePartialMatch(labels)
}

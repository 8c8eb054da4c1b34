package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// StepDuration is how long each step of a reconcile took (the step
// names of controllers/steps.go, and "status" for the final status
// write). Labelled by step only: per environment series would grow with
// the team.
var StepDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name: "devloop_reconcile_step_duration_seconds",
	Help: "Duration of each reconcile step (triggers, plan, sources, components, tests, on-demand, status).",
	// From a no-op's milliseconds to a build's minutes.
	Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300},
}, []string{"step"})

// ObserveStep records that step took since start.
func ObserveStep(step string, start time.Time) {
	StepDuration.WithLabelValues(step).Observe(time.Since(start).Seconds())
}

func init() {
	crmetrics.Registry.MustRegister(StepDuration)
}

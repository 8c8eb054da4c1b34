package main

import (
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// metricsOptions serves the metrics the controller-runtime way: the
// metrics name every tenant's environments, suites and results, so by
// default they are HTTPS (a self-signed certificate made at start) and only
// for callers the API server authenticates (TokenReview) and authorizes
// (SubjectAccessReview: get on the non-resource URL /metrics, the chart's
// metrics-reader ClusterRole).
func metricsOptions(opts options) metricsserver.Options {
	o := metricsserver.Options{BindAddress: opts.metricsAddr}
	if opts.metricsSecure {
		o.SecureServing = true
		o.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return o
}

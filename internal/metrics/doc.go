// Package metrics holds the operator's cost metrics, served with
// controller-runtime's on the manager's metrics endpoint: API requests by
// verb (a rest.Config transport wrapper), reconcile duration by step, and
// the bytes the work directory holds. Queue depth and reconcile totals are
// controller-runtime's own (workqueue_depth, controller_runtime_reconcile_total).
package metrics

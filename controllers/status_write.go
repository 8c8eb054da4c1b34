package controllers

import (
	"bytes"
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/metrics"
)

// emptyMergePatch is the merge patch of a status that did not change.
var emptyMergePatch = []byte("{}")

// writeStatus patches env's status from before, unless nothing changed: a
// no-op reconcile writes nothing (an empty patch still costs a request and
// an etcd read and write).
func (r *DevEnvironmentReconciler) writeStatus(ctx context.Context, env, before *v1alpha1.DevEnvironment) error {
	defer metrics.ObserveStep("status", time.Now())
	env.Status.Bound() // free text cut to the schema's bounds, never refused
	patch := client.MergeFrom(before)
	data, err := patch.Data(env)
	if err == nil && bytes.Equal(bytes.TrimSpace(data), emptyMergePatch) {
		return nil
	}
	return r.Status().Patch(ctx, env, patch)
}

package controllers

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// tenant is the client acting for the environment, made once per
// reconcile: what the reconciler does for an environment outside a deploy
// — creating builder Jobs and build cache claims, reading the Secrets and
// Flux sources the spec names — is done as its ServiceAccount too
// (Impersonate), so a DevEnvironment lends its author none of the
// operator's rights: no pods where the ServiceAccount may not create them,
// no Secret it may not read. Without Impersonate it is the operator.
func (r *DevEnvironmentReconciler) tenant(s *scope) (client.Client, error) {
	if s.tenant != nil {
		return s.tenant, nil
	}
	c, _, err := r.jobClient(s.env)
	if err != nil {
		return nil, err
	}
	s.tenant = c
	return c, nil
}

// tenantError words a failed request made as the environment's
// ServiceAccount: a denied one stalls the environment, naming what the
// ServiceAccount may not do (the API server's message names the verb,
// resource, namespace and user) — only an RBAC change fixes it.
func tenantError(err error, what string) error {
	if err == nil {
		return nil
	}
	if apierrors.IsForbidden(err) {
		return &StallingError{Reason: v1alpha1.ReasonForbidden,
			Err: fmt.Errorf("cannot %s: the environment's ServiceAccount is not allowed: %w", what, err)}
	}
	return fmt.Errorf("%s: %w", what, err)
}

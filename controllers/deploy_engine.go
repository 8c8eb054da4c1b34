package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/deploy"
	"github.com/devloop-dev/devloop/internal/fault"
)

// DefaultMaxReleaseFailures is how many reconciles in a row a Helm release
// may fail before the environment is Stalled with the Helm error.
const DefaultMaxReleaseFailures = 3

// errNoServiceAccount is the Stalled message of an environment with no
// identity to deploy as.
var errNoServiceAccount = errors.New("spec.serviceAccountName: no ServiceAccount to deploy as (set it, or start the operator with --default-service-account)")

// DeployEngine deploys components whose images are built: a Helm release
// or a set of manifests, with every image the environment built rewritten
// to its digest-pinned reference, and reports them Ready when every object
// is Current by kstatus. Every request it makes for an environment, reads
// included, impersonates the environment's ServiceAccount, so an
// environment can deploy no more than that ServiceAccount may.
type DeployEngine struct {
	// Config is the operator's own connection; it is copied with
	// impersonation for every environment.
	Config *rest.Config
	// Mapper and Scheme are the manager's, shared by every client.
	Mapper meta.RESTMapper
	Scheme *runtime.Scheme
	// DefaultServiceAccount is impersonated when an environment sets no
	// spec.serviceAccountName.
	DefaultServiceAccount string
	// AllowOperatorIdentity deploys environments that name no
	// ServiceAccount, when there is no default either, with the operator's
	// own identity. Off by default: it gives every user who may create a
	// DevEnvironment the operator's rights.
	AllowOperatorIdentity bool
	// Charts loads charts; its CacheDir holds downloaded archives.
	Charts *deploy.ChartLoader
	// MaxReleaseFailures is DefaultMaxReleaseFailures when zero.
	MaxReleaseFailures int
	// DriftQuietPeriod is how long after a Helm action its release is
	// not checked for hand edits: it is rolling out, and the check's
	// dry-run applies, on every rollout poll, would compete with the
	// rollout for the API server and the node. Zero checks at once.
	DriftQuietPeriod time.Duration
}

// DefaultDriftQuietPeriod is the operator's DriftQuietPeriod.
const DefaultDriftQuietPeriod = 10 * time.Second

var _ ComponentEngine = (*DeployEngine)(nil)

// ReconcileComponent deploys c and reports whether its objects are ready.
// A component with neither helm nor manifests (images only) is Ready once
// its images are built.
func (e *DeployEngine) ReconcileComponent(ctx context.Context, env *v1alpha1.DevEnvironment, c *v1alpha1.Component, st *v1alpha1.ComponentStatus, in *ComponentInputs) (ComponentResult, error) {
	if c.Helm == nil && c.Manifests == nil {
		return ComponentResult{Phase: v1alpha1.PhaseReady, Message: "images built; nothing to deploy"}, nil
	}
	user, err := e.identity(env)
	if err != nil {
		return ComponentResult{}, err
	}
	cl, err := e.client(in, user)
	if err != nil {
		return ComponentResult{}, err
	}
	images, refs := builtImages(env, in)
	var res ComponentResult
	if c.Helm != nil {
		res, err = e.reconcileHelm(ctx, env, c, st, in, user, cl, images, refs)
	} else {
		res, err = e.reconcileManifests(ctx, env, c, st, in, cl, images)
	}
	return res, deployError(err)
}

// FinalizeComponent uninstalls the component's release or prunes its
// inventory. What is already gone (a namespace deleted by hand) is skipped.
func (e *DeployEngine) FinalizeComponent(ctx context.Context, env *v1alpha1.DevEnvironment, c *v1alpha1.Component, st *v1alpha1.ComponentStatus) error {
	if c.Helm == nil && (st == nil || len(st.Inventory) == 0) {
		return nil
	}
	user, err := e.identity(env)
	if err != nil {
		// With no identity nothing was deployed either: an environment
		// that stalled for want of a ServiceAccount must still go away.
		log.FromContext(ctx).Info("nothing to remove: no identity to deploy as", "component", c.Name)
		return nil
	}
	cl, err := e.client(nil, user)
	if err != nil {
		return err
	}
	if c.Helm != nil {
		return e.uninstall(ctx, env, c, st, user)
	}
	_, err = deploy.Prune(ctx, cl, environmentLabel(env), fromStatusInventory(st.Inventory).Entries)
	return err
}

// identity is the user every request for env is made as: the
// ServiceAccount the spec names, else the operator's default one; empty
// (the operator itself) only when the operator allows it.
func (e *DeployEngine) identity(env *v1alpha1.DevEnvironment) (string, error) {
	sa := env.Spec.ServiceAccountName
	if sa == "" {
		sa = e.DefaultServiceAccount
	}
	if sa != "" {
		return deploy.ServiceAccountUser(env.Namespace, sa), nil
	}
	if e.AllowOperatorIdentity {
		return "", nil
	}
	return "", &StallingError{Reason: v1alpha1.ReasonNoServiceAccount, Err: errNoServiceAccount}
}

// restConfig is the operator's connection acting as user.
func (e *DeployEngine) restConfig(user string) *rest.Config {
	c := rest.CopyConfig(e.Config)
	if user != "" {
		c.Impersonate = rest.ImpersonationConfig{UserName: user}
	}
	return c
}

// client is an uncached client acting as user, made once per reconcile
// (in) and shared by the environment's components.
func (e *DeployEngine) client(in *ComponentInputs, user string) (client.Client, error) {
	if in != nil {
		if c, ok := in.clients[user]; ok {
			return c, nil
		}
	}
	c, err := client.New(e.restConfig(user), client.Options{Scheme: e.Scheme, Mapper: e.Mapper})
	if err != nil {
		return nil, fmt.Errorf("client for %q: %w", user, err)
	}
	if in != nil {
		if in.clients == nil {
			in.clients = map[string]client.Client{}
		}
		in.clients[user] = c
	}
	return c, nil
}

// environmentLabel is the value of deploy.LabelEnvironment on everything
// env applies: its name (a valid label value by the CRD's name rules).
// Prune only deletes objects carrying it.
func environmentLabel(env *v1alpha1.DevEnvironment) string { return env.Name }

// deployError maps the deploy package's fault classes: a permanent fault
// (forbidden, invalid objects) stalls the environment until the spec or
// the cluster's RBAC changes; anything else is retried.
func deployError(err error) error {
	var stalling *StallingError
	if err == nil || errors.As(err, &stalling) || !fault.IsPermanent(err) {
		return err
	}
	return &StallingError{Reason: v1alpha1.ReasonDeployFailed, Err: err}
}

// waitingMessage lists what is not ready yet, the first few of them.
func waitingMessage(notReady []string) string {
	const shown = 3
	msg := "waiting for " + strings.Join(notReady[:min(len(notReady), shown)], "; ")
	if len(notReady) > shown {
		msg += fmt.Sprintf(" (and %d more)", len(notReady)-shown)
	}
	return msg
}

func (e *DeployEngine) maxReleaseFailures() int {
	if e.MaxReleaseFailures > 0 {
		return e.MaxReleaseFailures
	}
	return DefaultMaxReleaseFailures
}

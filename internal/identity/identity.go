// Package identity is who devloop acts as for an environment: every
// request made for it, reads included, impersonates the environment's
// ServiceAccount (spec.serviceAccountName, else the operator's default),
// so a DevEnvironment lends its author none of the operator's rights. It
// owns the impersonated clients, their per-reconcile cache and exec into
// pods as that ServiceAccount.
package identity

import (
	"context"
	"errors"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/streaming/pkg/httpstream"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/fault"
)

// ErrNoServiceAccount is the Stalled message of an environment with no
// identity to act as.
var ErrNoServiceAccount = errors.New("spec.serviceAccountName: no ServiceAccount to deploy as (set it, or start the operator with --default-service-account)")

// Identity makes tenants: it is built once, from the operator's own
// connection.
type Identity struct {
	// Config is the operator's own connection; it is copied with
	// impersonation for every environment.
	Config *rest.Config
	// Mapper and Scheme are the manager's, shared by every client.
	Mapper meta.RESTMapper
	Scheme *runtime.Scheme
	// DefaultServiceAccount is impersonated when an environment sets no
	// spec.serviceAccountName.
	DefaultServiceAccount string
	// AllowOperatorIdentity lets environments that name no ServiceAccount,
	// when there is no default either, act as the operator itself. Off by
	// default: it gives every user who may create a DevEnvironment the
	// operator's rights.
	AllowOperatorIdentity bool
}

// ServiceAccountUser is the user name the API server gives a
// ServiceAccount, the form rest.Config impersonation expects.
func ServiceAccountUser(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// For is the tenant of one reconcile of env. Its client is made on first
// use and shared by everything that reconcile does.
func (i *Identity) For(env *v1alpha1.DevEnvironment) *Tenant {
	return &Tenant{id: i, env: env}
}

// Tenant acts as one environment's ServiceAccount during one reconcile.
type Tenant struct {
	id     *Identity
	env    *v1alpha1.DevEnvironment
	client client.Client
}

// ServiceAccount is the name of the ServiceAccount the environment acts
// as, or "" when it acts as the operator (or has no identity).
func (t *Tenant) ServiceAccount() string {
	return t.env.ServiceAccount(t.id.DefaultServiceAccount)
}

// User is the user every request is made as; "" is the operator itself,
// only when the operator allows it. Without either the environment is
// Stalled (fault.StalledError, reason NoServiceAccount).
func (t *Tenant) User() (string, error) {
	if sa := t.ServiceAccount(); sa != "" {
		return ServiceAccountUser(t.env.Namespace, sa), nil
	}
	if t.id.AllowOperatorIdentity {
		return "", nil
	}
	return "", fault.Stalled(v1alpha1.ReasonNoServiceAccount, ErrNoServiceAccount)
}

// Describe names who acts, for messages: the ServiceAccount's user name,
// or "the operator".
func (t *Tenant) Describe() string {
	if u, err := t.User(); err == nil && u != "" {
		return u
	}
	return "the operator"
}

// RESTConfig is the operator's connection acting as the tenant's user.
func (t *Tenant) RESTConfig() (*rest.Config, error) {
	user, err := t.User()
	if err != nil {
		return nil, err
	}
	return t.configFor(user), nil
}

func (t *Tenant) configFor(user string) *rest.Config {
	c := rest.CopyConfig(t.id.Config)
	if user != "" {
		c.Impersonate = rest.ImpersonationConfig{UserName: user}
	}
	return c
}

// BaseConfig is the operator's own connection, for libraries (Helm) that
// impersonate by user name themselves.
func (t *Tenant) BaseConfig() *rest.Config { return t.id.Config }

// Mapper is the shared REST mapper.
func (t *Tenant) Mapper() meta.RESTMapper { return t.id.Mapper }

// Client is an uncached client acting as the tenant, made once per
// reconcile.
func (t *Tenant) Client() (client.Client, error) {
	if t.client != nil {
		return t.client, nil
	}
	user, err := t.User()
	if err != nil {
		return nil, err
	}
	c, err := client.New(t.configFor(user), client.Options{Scheme: t.id.Scheme, Mapper: t.id.Mapper})
	if err != nil {
		return nil, fmt.Errorf("client for %q: %w", user, err)
	}
	t.client = c
	return c, nil
}

// Exec runs command in a container of a pod through the API server's
// exec subresource as the tenant: it needs get (WebSocket) or create
// (SPDY) on pods/exec, as `kubectl exec` would; the operator itself has no
// such right. A command that exits non-zero gives a
// k8s.io/client-go/util/exec.CodeExitError; a refused one an error for
// which apierrors.IsForbidden, or the UpgradeFailureError's Cause, holds.
func (t *Tenant) Exec(ctx context.Context, namespace, pod, container string, command []string, stdout, stderr io.Writer) error {
	return t.ExecWithStdin(ctx, namespace, pod, container, command, nil, stdout, stderr)
}

// ExecWithStdin is Exec with stdin streamed to the command (none when
// nil): a live update's files to the supervisor's sync.
func (t *Tenant) ExecWithStdin(ctx context.Context, namespace, pod, container string, command []string, stdin io.Reader, stdout, stderr io.Writer) error {
	cfg, err := t.RESTConfig()
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(namespace).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: command, Stdin: stdin != nil, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	// WebSockets first: a refused upgrade keeps the API server's Status
	// (in an UpgradeFailureError), where SPDY's keeps only its message.
	ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", req.URL().String())
	if err != nil {
		return fmt.Errorf("exec in pod %s/%s: %w", namespace, pod, err)
	}
	opts := remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr}
	err = ws.StreamWithContext(ctx, opts)
	var upgrade *httpstream.UpgradeFailureError
	if err == nil || !errors.As(err, &upgrade) {
		return err
	}
	// No WebSocket stream: a server that does not speak it, or a tenant
	// granted create but not get on pods/exec. SPDY, then; when it fails
	// too (not by the command's exit code) after a refused WebSocket
	// upgrade, the refusal's Status is what is reported.
	spdy, serr := remotecommand.NewSPDYExecutor(cfg, "POST", req.URL())
	if serr != nil {
		return fmt.Errorf("exec in pod %s/%s: %w", namespace, pod, serr)
	}
	serr = spdy.StreamWithContext(ctx, opts)
	var status apierrors.APIStatus
	var exit utilexec.ExitError
	if serr != nil && errors.As(upgrade.Cause, &status) && !errors.As(serr, &exit) {
		return fmt.Errorf("%w (over SPDY: %v)", err, serr)
	}
	return serr
}

// Refused words a failed request made as the tenant: a denied one stalls
// the environment (reason Forbidden), naming what the ServiceAccount may
// not do (the API server's message names the verb, resource, namespace
// and user); only an RBAC change fixes it.
func Refused(err error, what string) error {
	if err == nil {
		return nil
	}
	if apierrors.IsForbidden(err) {
		return fault.Stalled(v1alpha1.ReasonForbidden,
			fmt.Errorf("cannot %s: the environment's ServiceAccount is not allowed: %w", what, err))
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Package cli is the kubectl-devloop plugin: push a directory as an OCI
// source and follow the rollout, show an environment as a tree, read the
// logs of a component, a build or a test run, trigger and cancel test
// suites, and wait for Ready. Every command runs with the user's kubeconfig
// and context, and only in the contexts the user allowed (contexts.go).
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// Options are what a test changes about the plugin; the zero value is the
// real plugin.
type Options struct {
	// PollInterval is how often a follow reads the environment again.
	PollInterval time.Duration
	// ProgressInterval is how often a long wait says it is still waiting.
	ProgressInterval time.Duration
	// Logs reads container logs; the API server's pods/log when nil.
	Logs LogSource
	// Color forces colours on or off; nil decides from the terminal.
	Color *bool
	// wrapTransport wraps the API server connection's transport (tests
	// record requests with it).
	wrapTransport func(http.RoundTripper) http.RoundTripper
}

// ExitError ends the plugin with Code after the message (if any) is
// printed: a failed rollout, a failed test, a timeout.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// failed is the error of a command whose subject failed (exit code 1).
func failed(format string, args ...any) error {
	return &ExitError{Code: 1, Err: fmt.Errorf(format, args...)}
}

// app is what every command shares.
type app struct {
	opts    Options
	streams genericiooptions.IOStreams
	flags   *genericclioptions.ConfigFlags
}

// Main runs the plugin with args (without the program name) and returns
// the process exit code. Ctrl-C cancels the running command.
func Main(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	return Run(ctx, args, streams, Options{})
}

// Run runs the plugin in-process: what Main and the tests call.
func Run(ctx context.Context, args []string, streams genericiooptions.IOStreams, opts Options) int {
	root := NewRootCommand(streams, opts)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	// Errors quote status messages (failed(...)): printed printable.
	fmt.Fprintln(streams.ErrOut, "Error:", printable(err.Error()))
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return 1
}

// NewRootCommand is `kubectl devloop` with its subcommands.
func NewRootCommand(streams genericiooptions.IOStreams, opts Options) *cobra.Command {
	if opts.PollInterval <= 0 {
		opts.PollInterval = 500 * time.Millisecond
	}
	if opts.ProgressInterval <= 0 {
		opts.ProgressInterval = 15 * time.Second
	}
	a := &app{opts: opts, streams: streams, flags: genericclioptions.NewConfigFlags(true)}
	root := &cobra.Command{
		Use:   "kubectl-devloop",
		Short: "The devloop inner loop from a laptop: push, status, logs, trigger, wait",
		Long: `kubectl devloop works on DevEnvironments (devloop.dev/v1alpha1) with your
kubeconfig and context. It refuses contexts you did not allow when an allow-list
is configured: DEVLOOP_ALLOWED_CONTEXTS (comma list) or allowedContexts in
$XDG_CONFIG_HOME/devloop/config.yaml (~/.config/devloop/config.yaml). With a
list, the server must also be the one the context names in the kubeconfig
(--server and --cluster cannot point an allowed context elsewhere) and the one
it was first used with, recorded in $XDG_CONFIG_HOME/devloop/servers.yaml.

Exit codes: 0 success; 1 the subject failed (rollout, test, timeout) or the
command could not run.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// Help reads as kubectl shows the plugin.
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl devloop"},
	}
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	a.flags.AddFlags(root.PersistentFlags())
	root.AddCommand(
		newPushCommand(a),
		newStatusCommand(a),
		newChangesCommand(a),
		newLogsCommand(a),
		newTriggerCommand(a),
		newCancelCommand(a),
		newWaitCommand(a),
		newSecretCommand(a),
		newSettingsCommand(a),
		newUpCommand(a),
		newDownCommand(a),
		newPortForwardCommand(a),
		newDebugCommand(a),
		newUICommand(a),
		newInitCommand(a),
	)
	return root
}

// scheme holds the built-in types and devloop's.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(v1alpha1.AddToScheme(s))
	return s
}()

// session is a connection to the cluster of the chosen context.
type session struct {
	config    *rest.Config
	client    client.Client
	clientset kubernetes.Interface
	namespace string
	context   string
	// watcher is client, which can also watch (follow_watch.go); nil
	// for a session built without one.
	watcher client.WithWatch
	// discovered maps kinds by asking the API server (mapper.go); nil
	// for a session built without one.
	discovered meta.RESTMapper
}

// connect checks the context against the allow-list, then builds clients.
func (a *app) connect() (*session, error) {
	loader := a.flags.ToRawKubeConfigLoader()
	raw, err := loader.RawConfig()
	if err != nil {
		return nil, fmt.Errorf("reading kubeconfig: %w", err)
	}
	contextName := raw.CurrentContext
	if a.flags.Context != nil && *a.flags.Context != "" {
		contextName = *a.flags.Context
	}
	if err := checkContextAllowed(contextName); err != nil {
		return nil, err
	}
	ns, _, err := loader.Namespace()
	if err != nil {
		return nil, fmt.Errorf("reading the namespace from kubeconfig: %w", err)
	}
	cfg, err := a.flags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("reading kubeconfig: %w", err)
	}
	if err := checkContextServer(raw, contextName, cfg.Host); err != nil {
		return nil, err
	}
	if a.opts.wrapTransport != nil {
		cfg.Wrap(a.opts.wrapTransport)
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to the cluster of context %q: %w", contextName, err)
	}
	mapper, discovered, err := restMapper(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("connecting to the cluster of context %q: %w", contextName, err)
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme, HTTPClient: httpClient, Mapper: mapper})
	if err != nil {
		return nil, fmt.Errorf("connecting to the cluster of context %q: %w", contextName, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &session{config: cfg, client: c, watcher: c, discovered: discovered, clientset: cs, namespace: ns, context: contextName}, nil
}

func (a *app) out() io.Writer    { return a.streams.Out }
func (a *app) errOut() io.Writer { return a.streams.ErrOut }

// Command manager is the devloop operator.
package main

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	"github.com/devloop-dev/devloop/controllers"
	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/internal/build/helper"
	"github.com/devloop-dev/devloop/internal/deploy"
	"github.com/devloop-dev/devloop/internal/egress"
	"github.com/devloop-dev/devloop/internal/metrics"
	"github.com/devloop-dev/devloop/internal/operator"
	"github.com/devloop-dev/devloop/internal/plan"
	"github.com/devloop-dev/devloop/internal/source"
)

func main() {
	if code, ok := runAsSupervisor(); ok {
		os.Exit(code)
	}
	var err error
	if len(os.Args) > 1 && os.Args[1] == "helper" {
		err = runHelper(os.Args[2:])
	} else if len(os.Args) > 1 && os.Args[1] == "registry-front" {
		err = runRegistryFront(os.Args[2:])
	} else if len(os.Args) > 1 && os.Args[1] == "registry-node-proxy" {
		err = runRegistryNodeProxy(os.Args[2:])
	} else {
		err = run(os.Args[1:])
	}
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "devloop:", err)
		var code helper.ExitError
		if errors.As(err, &code) {
			os.Exit(code.Code)
		}
		os.Exit(1)
	}
}

func run(args []string) error {
	opts, err := parseFlags(args)
	if err != nil {
		return err
	}
	logger, err := newLogger(opts.logLevel, opts.logFormat)
	if err != nil {
		return err
	}
	ctrl.SetLogger(logger)
	setupLog := logger.WithName("setup")
	setMemoryLimit(setupLog)

	cfg, err := restConfig(opts.kubeconfig)
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	mgr, err := newManager(cfg, opts)
	if err != nil {
		return err
	}
	setupLog.Info("starting manager", "concurrent", opts.concurrent, "concurrentPerNamespace", opts.namespaceShare, "leaderElection", opts.leaderElect,
		"defaultServiceAccount", opts.defaultServiceAccount, "allowOperatorIdentity", opts.allowOperatorIdentity, "noCrossNamespaceRefs", opts.noCrossNamespaceRefs,
		"helperImage", opts.helperImage, "workDir", opts.workDir,
		"watchLabelSelector", opts.shard.selectorString(), "leaderElectionID", opts.shard.leaderElectionID)
	return mgr.Start(ctrl.SetupSignalHandler())
}

// newManager makes the manager, its caches scoped to this shard's
// environments and the Jobs devloop creates, and wires the reconciler
// with one engine of each kind.
func newManager(cfg *rest.Config, opts options) (ctrl.Manager, error) {
	// Every client made from this config (the manager's, the tenants'
	// impersonating copies, Helm's) counts its requests; a copy, so a
	// caller's config is not wrapped twice.
	cfg = rest.CopyConfig(cfg)
	metrics.CountRequests(cfg)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: newScheme(),
		// One namespace only (--watch-namespace): the operator sees, and
		// reconciles, nothing outside it.
		Cache:                  operator.CacheOptions(operator.WatchScope{Namespace: opts.watchNamespace, Environments: opts.shard.selector}),
		Metrics:                metricsOptions(opts),
		HealthProbeBindAddress: opts.probeAddr,
		// Off unless asked for: the heap profile of an operator that runs
		// out of memory (issue 46's remote benchmark) is read here.
		PprofBindAddress:        opts.pprofAddr,
		LeaderElection:          opts.leaderElect,
		LeaderElectionID:        opts.shard.leaderElectionID,
		LeaderElectionNamespace: opts.leaderElectionNamespace,
		// Leaving the lease on shutdown lets a replacement take over at
		// once instead of waiting out the lease.
		LeaderElectionReleaseOnCancel: true,
		// Tests run several shards' managers in one process.
		Controller: config.Controller{SkipNameValidation: &opts.skipNameValidation},
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	if opts.egressCluster {
		denyCluster(mgr.GetAPIReader(), opts.egress, ctrl.Log.WithName("setup"))
	}
	// The identity, the sources step and each engine are made once and
	// shared by every reconcile.
	cs, err := kubeClientset(cfg)
	if err != nil {
		return nil, err
	}
	teamCache, err := opts.buildCache.options(cs)
	if err != nil {
		return nil, err
	}
	op := operator.New(mgr, operator.Options{
		TeamCache:              teamCache,
		HelperImage:            opts.helperImage,
		WorkDir:                opts.workDir,
		DefaultServiceAccount:  opts.defaultServiceAccount,
		AllowOperatorIdentity:  opts.allowOperatorIdentity,
		Egress:                 opts.egress,
		LayerCompression:       opts.layerCompression,
		MaxBuildTimeout:        opts.maxBuildTimeout,
		MaxHelmTimeout:         opts.maxHelmTimeout,
		LeaderLease:            opts.leaderLease(),
		MaxSourceSize:          opts.maxSourceSize,
		SourceStoreMaxBytes:    opts.sourceStoreMaxBytes,
		SourceStoreFlush:       opts.sourceStoreFlush,
		SourceStoreEnvMaxBytes: opts.sourceStoreEnvMaxBytes,
	})
	r := controllers.New(mgr, controllers.Wiring{
		Identity:         op.Identity,
		Sources:          op.Sources,
		Engines:          op.Engines,
		Policy:           plan.Policy{NoCrossNamespaceRefs: opts.noCrossNamespaceRefs},
		DriftInterval:    opts.driftInterval,
		ReconcileTimeout: opts.reconcileTimeout,
		NamespaceShare:   opts.namespaceShare,
	})
	if err := r.SetupWithManager(mgr, opts.concurrent); err != nil {
		return nil, fmt.Errorf("setting up controller: %w", err)
	}
	if err := addRegistryTokenService(mgr, cfg, opts.registryToken); err != nil {
		return nil, err
	}
	if err := addBuildCacheService(mgr, cfg, &opts.buildCache, opts.workDir, opts.defaultServiceAccount); err != nil {
		return nil, err
	}
	if err := mgr.Add(metrics.WorkDirSampler{Root: opts.workDir}); err != nil {
		return nil, err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, err
	}
	// Ready once the informer caches have synced: before that the
	// operator cannot act on anything.
	if err := mgr.AddReadyzCheck("readyz", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return errors.New("informer caches not synced")
		}
		return nil
	}); err != nil {
		return nil, err
	}

	return mgr, nil
}

type options struct {
	reconcileTimeout      time.Duration
	maxHelmTimeout        time.Duration
	maxBuildTimeout       time.Duration
	metricsAddr           string
	metricsSecure         bool
	probeAddr             string
	pprofAddr             string
	leaderElect           bool
	concurrent            int
	namespaceShare        int
	defaultServiceAccount string
	noCrossNamespaceRefs  bool
	allowOperatorIdentity bool
	logLevel              string
	logFormat             string
	kubeconfig            string
	helperImage           string
	workDir               string
	maxSourceSize         int64
	egress                *egress.Policy
	egressCluster         bool
	// sourceStoreMaxBytes and sourceStoreEnvMaxBytes bound the source
	// store and one namespace's share of it.
	sourceStoreMaxBytes    int64
	sourceStoreEnvMaxBytes int64
	// sourceStoreFlush: the source store outlives the node (a claim).
	sourceStoreFlush bool
	driftInterval    time.Duration
	layerCompression source.Compression
	watchNamespace   string
	// shard is which environments this instance reconciles and the lease
	// it elects its leader on.
	shard                   shard
	leaderElectionNamespace string
	registryToken           registryTokenOptions
	buildCache              buildCacheOptions
	// skipNameValidation lets tests run several managers in one process.
	skipNameValidation bool
}

// restConfig loads the given kubeconfig, or the in-cluster config,
// $KUBECONFIG or ~/.kube/config when none is given.
func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	return ctrl.GetConfig()
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443", "address the Prometheus metrics endpoint binds to; 0 disables it")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", true, "serve metrics over HTTPS to callers the API server authenticates and authorizes (get on the /metrics non-resource URL); false: plain HTTP to anyone who reaches the port")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address the /healthz and /readyz probes bind to")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "", "address Go's /debug/pprof profiles are served on, for a heap profile of the operator (empty: off; bind it to 127.0.0.1 and port-forward)")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "elect a leader so only one replica reconciles")
	fs.IntVar(&o.concurrent, "concurrent", 4, "how many DevEnvironments are reconciled at once")
	fs.IntVar(&o.namespaceShare, "concurrent-per-namespace", 0, "how many of the --concurrent workers the DevEnvironments of one namespace may hold at once, so one tenant's slow reconciles never hold them all; 0 is half of --concurrent, rounded up")
	fs.StringVar(&o.defaultServiceAccount, "default-service-account", "", "ServiceAccount impersonated for environments that set no spec.serviceAccountName")
	fs.BoolVar(&o.allowOperatorIdentity, "allow-operator-identity", false, "deploy environments that name no ServiceAccount, when --default-service-account is empty, with the operator's own identity (gives every DevEnvironment author the operator's rights; off by default)")
	fs.BoolVar(&o.noCrossNamespaceRefs, "no-cross-namespace-refs", true, "refuse references to objects in other namespaces, such as Flux sources (on by default, as Flux's multi-tenancy lockdown; =false allows them)")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info or error")
	fs.StringVar(&o.logFormat, "log-format", "json", "log format: json or console")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file; in-cluster config, $KUBECONFIG or ~/.kube/config when empty")
	fs.StringVar(&o.helperImage, "helper-image", os.Getenv("DEVLOOP_HELPER_IMAGE"), "the operator's own image, run by builder pods to fetch sources and push images ($DEVLOOP_HELPER_IMAGE)")
	fs.StringVar(&o.workDir, "work-dir", filepath.Join(os.TempDir(), "devloop"), "directory for fetched sources and cached base image layers")
	fs.Int64Var(&o.maxSourceSize, "max-source-size", 1<<30, "largest extracted size of one source, in bytes")
	fs.BoolVar(&o.sourceStoreFlush, "source-store-flush", false, "flush each fetched source to disk and trust it in any boot: for a --work-dir on a volume that outlives the node (off: an entry is trusted only in the boot that wrote it)")
	fs.Int64Var(&o.sourceStoreMaxBytes, "source-store-max-bytes", 2<<30, "bound of the fetched source store, in bytes: least recently used entries no environment uses now are removed to stay within it (keep it below the work directory's size limit, with room for fetches in progress)")
	fs.Int64Var(&o.sourceStoreEnvMaxBytes, "source-store-env-max-bytes", 0, "what the sources of one namespace's environments may take of the source store together, in bytes; 0 is half of --source-store-max-bytes")
	fs.DurationVar(&o.driftInterval, "drift-interval", controllers.DefaultDriftInterval, "how often a Ready environment's applied manifests are checked for hand edits (and corrected)")
	fs.DurationVar(&o.reconcileTimeout, "reconcile-timeout", controllers.DefaultReconcileTimeout, "longest one reconcile of an environment may take; what is cut short goes on at the next one")
	fs.DurationVar(&o.maxHelmTimeout, "max-helm-timeout", deploy.DefaultMaxHelmTimeout, "cap on spec.components[].helm.timeout (keep it below --reconcile-timeout)")
	fs.DurationVar(&o.maxBuildTimeout, "max-build-timeout", build.DefaultMaxBuildTimeout, "cap on spec.components[].images[].run.timeout, for builder Jobs and warm builds")
	fs.StringVar(&o.watchNamespace, "watch-namespace", "", "reconcile DevEnvironments in this namespace only (all namespaces when empty)")
	fs.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election Lease; empty: the namespace the operator runs in")
	registerRegistryTokenFlags(fs, &o.registryToken)
	registerBuildCacheFlags(fs, &o.buildCache)
	egressFlags := registerEgressFlags(fs)
	shardFlags := registerShardFlags(fs)
	layerCompression := fs.String("layer-compression", "auto", "how built image layers are pushed: gzip, none, or auto (none for a registry on a loopback, private or cluster-internal address, gzip for others)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.sourceStoreMaxBytes < 1 || o.sourceStoreEnvMaxBytes < 0 {
		return o, fmt.Errorf("--source-store-max-bytes must be positive and --source-store-env-max-bytes not negative")
	}
	if o.concurrent < 1 {
		return o, fmt.Errorf("--concurrent must be at least 1, got %d", o.concurrent)
	}
	if o.namespaceShare < 0 || o.namespaceShare > o.concurrent {
		return o, fmt.Errorf("--concurrent-per-namespace must be between 0 and --concurrent (%d), got %d", o.concurrent, o.namespaceShare)
	}
	var err error
	if o.egress, err = egressFlags.policy(); err != nil {
		return o, err
	}
	o.egressCluster = egressFlags.cluster
	if o.shard, err = shardFlags.shard(); err != nil {
		return o, err
	}
	if o.layerCompression, err = source.ParseCompression(*layerCompression); err != nil {
		return o, fmt.Errorf("--layer-compression %w", err)
	}
	return o, nil
}

// leaderLease names the Lease this process is elected on, "" without
// leader election: the namespace (as controller-runtime picks it: the
// flag, else the pod's own) and the shard's lease name.
func (o *options) leaderLease() string {
	if !o.leaderElect {
		return ""
	}
	ns := o.leaderElectionNamespace
	if ns == "" {
		b, _ := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
		ns = strings.TrimSpace(string(b))
	}
	return ns + "/" + o.shard.leaderElectionID
}

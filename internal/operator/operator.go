// Package operator wires devloop once: the identity requests act as, the
// sources step and one engine of each kind, for the manager
// (cmd/manager), the envtest runner every package's operator tests share
// (test/operatortest) and the benchmarks alike, so none of them drifts
// from what the operator really runs. It is not an engine: it imports
// them all, and the controllers reach it only in tests (the reconciler
// takes the engine.Set it makes).
package operator

import (
	"path/filepath"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/internal/deploy"
	"github.com/devloop-dev/devloop/internal/egress"
	"github.com/devloop-dev/devloop/internal/engine"
	"github.com/devloop-dev/devloop/internal/identity"
	"github.com/devloop-dev/devloop/internal/liveupdate"
	"github.com/devloop-dev/devloop/internal/pods"
	"github.com/devloop-dev/devloop/internal/source"
	"github.com/devloop-dev/devloop/internal/testrun"
)

// Options are the operator's settings (its flags) and, for tests, the
// few seams they script.
type Options struct {
	// HelperImage is the operator's own image, run by builder and test
	// pods to fetch sources, push images and report results.
	HelperImage string
	// WorkDir holds the source store, base layers and chart archives.
	WorkDir string
	// DefaultServiceAccount and AllowOperatorIdentity: see
	// identity.Identity.
	DefaultServiceAccount string
	AllowOperatorIdentity bool
	// Egress checks every connection made for a tenant; nil is
	// egress.Default().
	Egress *egress.Policy
	// LayerCompression, MaxBuildTimeout: see build.Options.
	LayerCompression source.Compression
	MaxBuildTimeout  time.Duration
	// MaxHelmTimeout: see deploy.Engine.
	MaxHelmTimeout time.Duration
	// LeaderLease is the Lease the process is elected on; "" when it runs
	// without leader election (see deploy.NewHelmWriter).
	LeaderLease string
	// MaxSourceSize, SourceStoreMaxBytes and SourceStoreEnvMaxBytes bound
	// a source, the source store and one environment's share of it.
	MaxSourceSize, SourceStoreMaxBytes, SourceStoreEnvMaxBytes int64
	// SourceStoreFlush: WorkDir outlives the node (source.Fetcher.Flush).
	SourceStoreFlush bool
	// TeamCache turns on the team Go build cache in builder pods; nil:
	// off (see build.TeamCacheOptions).
	TeamCache *build.TeamCacheOptions

	// Seams for tests; the zero values are what the operator runs.
	Test TestSeams
}

// TestSeams replace what a test cluster without a kubelet, or a test that
// scripts a pod, cannot provide.
type TestSeams struct {
	// Logs reads builder and test pod logs as the operator instead of as
	// the tenant (a fake log server).
	Logs pods.LogReader
	// BuildExec runs builds in warm builders; LiveExec syncs live updates.
	BuildExec build.PodExecutor
	LiveExec  liveupdate.Executor
	// Supervisor is a static supervisor binary (a test binary is not).
	Supervisor string
	// VerifyInterval is how often unchanged images are checked to be in
	// the registry.
	VerifyInterval time.Duration
	// TestStartTimeout is how long a test pod may wait to start.
	TestStartTimeout time.Duration
	// NoDriftQuietPeriod checks a release for hand edits right after a
	// Helm action (deploy.Engine.DriftQuietPeriod zero).
	NoDriftQuietPeriod bool
}

// Operator is what New wires.
type Operator struct {
	// Identity is who every request made for an environment acts as.
	Identity *identity.Identity
	// Sources is the sources step.
	Sources *source.Resolver
	// Engines are the engines, in the order the reconciler calls them.
	Engines engine.Set
}

// New makes the identity, the sources step and the engines, once, for
// the manager's cluster.
func New(mgr ctrl.Manager, o Options) Operator {
	if o.Egress == nil {
		o.Egress = egress.Default()
	}
	recorder := mgr.GetEventRecorder("devloop")
	// Pod logs shown in status are read as the tenant.
	logsFor, logs := pods.TenantLogs, o.Test.Logs
	if logs != nil {
		logsFor = nil
	}
	builds := &build.Engine{
		Options: build.Options{
			HelperImage:     o.HelperImage,
			Compression:     o.LayerCompression,
			MaxBuildTimeout: o.MaxBuildTimeout,
			BaseCacheDir:    filepath.Join(o.WorkDir, "base-layers"),
			// Registries (spec.registry.prefix, bases) are dialled
			// through the egress policy.
			Transport:      o.Egress.Transport(),
			Supervisor:     o.Test.Supervisor,
			VerifyInterval: o.Test.VerifyInterval,
			TeamCache:      o.TeamCache,
		},
		Cache:     mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		LogsFor:   logsFor,
		Logs:      logs,
		Exec:      o.Test.BuildExec,
		Events:    recorder,
	}
	quiet := deploy.DefaultDriftQuietPeriod
	if o.Test.NoDriftQuietPeriod {
		quiet = 0
	}
	deployer := &deploy.Engine{
		Mapper:           mgr.GetRESTMapper(),
		Charts:           &deploy.ChartLoader{CacheDir: filepath.Join(o.WorkDir, "charts"), Egress: o.Egress},
		DriftQuietPeriod: quiet,
		MaxHelmTimeout:   o.MaxHelmTimeout,
		HelmWriter:       deploy.NewHelmWriter(o.LeaderLease),
		LogsFor:          logsFor,
		Logs:             logs,
	}
	tests := &testrun.Engine{
		Client:       mgr.GetClient(),
		APIReader:    mgr.GetAPIReader(),
		Events:       recorder,
		LogsFor:      logsFor,
		Logs:         logs,
		HelperImage:  o.HelperImage,
		StartTimeout: o.Test.TestStartTimeout,
		TeamCache:    o.TeamCache.Service(),
	}
	// images[].liveUpdate: changed files synced into running pods as the
	// tenant (pods/exec), over one open session per container, instead of
	// a rollout.
	live := &liveupdate.Engine{Images: builds, Events: recorder, Exec: o.Test.LiveExec, Sessions: o.Test.LiveExec == nil,
		Nodes: mgr.GetAPIReader()}
	// It joins the pushes of the builds it syncs: those may go on while
	// it syncs them.
	builds.PushBehind = true
	return Operator{
		Identity: &identity.Identity{
			Config:                mgr.GetConfig(),
			Mapper:                mgr.GetRESTMapper(),
			Scheme:                mgr.GetScheme(),
			DefaultServiceAccount: o.DefaultServiceAccount,
			AllowOperatorIdentity: o.AllowOperatorIdentity,
		},
		Sources: &source.Resolver{Fetcher: &source.Fetcher{
			Reader:  mgr.GetAPIReader(),
			Root:    filepath.Join(o.WorkDir, "sources"),
			MaxSize: o.MaxSourceSize,
			Egress:  o.Egress,
			// The store is collected to stay within these bounds.
			MaxStoreBytes: o.SourceStoreMaxBytes,
			MaxEnvBytes:   o.SourceStoreEnvMaxBytes,
			Flush:         o.SourceStoreFlush,
			// This operator's own: what it knows of the store and its
			// fetch locks.
			Store: source.NewStore(),
		}},
		Engines: engine.Set{
			Triggers:   testrun.Triggers{Engine: tests},
			Builds:     builds,
			LiveUpdate: live,
			Deploy:     deployer,
			Tests:      tests,
			Wakes:      []<-chan event.GenericEvent{builds.Wake(), deployer.Wake()},
		},
	}
}

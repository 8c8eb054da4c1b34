package deploy

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/deploy/helm"
	"github.com/devloop-dev/devloop/internal/engine"
	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/internal/identity"
	"github.com/devloop-dev/devloop/internal/pods"
	"github.com/devloop-dev/devloop/internal/source"
)

// DefaultMaxReleaseFailures is how many reconciles in a row a Helm release
// may fail before the environment is Stalled with the Helm error.
const DefaultMaxReleaseFailures = 3

// DefaultDriftQuietPeriod is the operator's DriftQuietPeriod.
const DefaultDriftQuietPeriod = 10 * time.Second

// ChartLoader loads Helm charts (helm.ChartLoader); the alias keeps the
// Engine's Charts field, and the operator's construction of it, as they
// were before Helm moved to its own package.
type ChartLoader = helm.ChartLoader

// Result is what the engine reports about one component: its phase and
// why (the engine contract's result).
type Result = engine.Result

// Engine deploys components whose images are built: a Helm release or a
// set of manifests, with every image the environment built rewritten to
// its digest-pinned reference, and reports them Ready when every object
// is Current by kstatus. Every request it makes for an environment, reads
// included, is made as the environment's tenant (identity), so an
// environment can deploy no more than its ServiceAccount may.
type Engine struct {
	// Mapper is the manager's, shared by every client.
	Mapper meta.RESTMapper
	// Charts loads charts; its CacheDir holds downloaded archives.
	Charts *ChartLoader
	// MaxReleaseFailures is DefaultMaxReleaseFailures when zero.
	MaxReleaseFailures int
	// DriftQuietPeriod is how long after a Helm action its release is
	// not checked for hand edits: it is rolling out, and the check's
	// dry-run applies, on every rollout poll, would compete with the
	// rollout for the API server and the node. Zero checks at once.
	DriftQuietPeriod time.Duration
	// MaxHelmTimeout caps spec.components[].helm.timeout: no tenant's
	// hooks hold a worker longer (keep it below the reconcile deadline).
	// DefaultMaxHelmTimeout when zero.
	MaxHelmTimeout time.Duration
	// LogsFor, when set, gives the reader of an environment's pod logs
	// (as its tenant): a failed hook's output is shown in status. Logs is
	// used when it is nil (tests without a kubelet).
	LogsFor func(t *identity.Tenant) (pods.LogReader, error)
	Logs    pods.LogReader
	// HelmWriter names this process on the revisions it writes
	// (NewHelmWriter), so the next leader of its lease unlocks a revision
	// it left pending at once; "" without leader election.
	HelmWriter string

	// applied is what this engine applied (book()).
	applied     *appliedBook
	appliedOnce sync.Once
	// releases is what it remembers of its Helm work (helmReleases()).
	releases     *helm.Releases
	releasesOnce sync.Once
	// builds are its recent kustomize builds (kustomizeBuilds()).
	builds     *buildCache
	buildsOnce sync.Once
}

// kustomizeBuilds is e's memo of kustomize builds, made on first use, and
// e's alone.
func (e *Engine) kustomizeBuilds() *buildCache {
	e.buildsOnce.Do(func() { e.builds = newBuildCache() })
	return e.builds
}

// renderManifests is Render remembering e's kustomize builds.
func (e *Engine) renderManifests(dir string, paths []string, namespace string) ([]*unstructured.Unstructured, error) {
	return render(dir, paths, namespace, e.Mapper, e.kustomizeBuilds())
}

// helmReleases is e's Helm memory (the revisions it wrote, its actions in
// flight, its discoveries), made on first use so a zero Engine works, and
// e's alone: two engines in one process share none of it.
func (e *Engine) helmReleases() *helm.Releases {
	e.releasesOnce.Do(func() { e.releases = helm.NewReleases() })
	return e.releases
}

// NewHelmWriter is HelmWriter for a process elected on lease ("" when it
// runs without leader election).
func NewHelmWriter(lease string) string { return helm.NewWriter(lease) }

// DefaultMaxHelmTimeout is the cap of a Helm action's timeout when
// Engine.MaxHelmTimeout is zero.
const DefaultMaxHelmTimeout = 8 * time.Minute

func (e *Engine) maxHelmTimeout() time.Duration {
	if e.MaxHelmTimeout > 0 {
		return e.MaxHelmTimeout
	}
	return DefaultMaxHelmTimeout
}

// Progress is told, before a long action starts (a Helm install or
// upgrade), what is about to happen, so status can say so while it runs.
type Progress func(message string)

// reconcileComponent deploys c and reports whether its objects are ready.
// A component with neither helm nor manifests (images only) is Ready once
// its images are built. Errors are fault-classified: a permanent one
// stalls the environment (reason DeployFailed). progress may be nil.
func (e *Engine) reconcileComponent(ctx context.Context, env *v1alpha1.DevEnvironment, c *v1alpha1.Component, st *v1alpha1.ComponentStatus, t *identity.Tenant, sources source.Resolved, progress Progress) (Result, error) {
	kind := e.kindOf(c)
	if kind == nil {
		return Result{Phase: v1alpha1.PhaseReady, Message: "images built; nothing to deploy"}, nil
	}
	cl, err := t.Client()
	if err != nil {
		return Result{}, err
	}
	if err := e.removeReplaced(ctx, env, c, st, t, cl); err != nil {
		return Result{}, deployError(err)
	}
	images, refs := builtImages(env)
	res, err := kind.reconcile(ctx, deployment{env: env, c: c, st: st, sources: sources, tenant: t, cl: cl,
		images: images, refs: refs, progress: progress})
	return res, deployError(err)
}

// removeReplaced removes what the component deployed that its spec no
// longer describes: the objects of its manifests once it deploys a chart,
// its release once it applies manifests (or deploys nothing), a release
// whose name or namespace changed. Status says what was deployed, so
// nothing is left behind by a switch or a rename.
func (e *Engine) removeReplaced(ctx context.Context, env *v1alpha1.DevEnvironment, c *v1alpha1.Component, st *v1alpha1.ComponentStatus, t *identity.Tenant, cl client.Client) error {
	if c.Manifests == nil && len(st.Inventory) > 0 {
		log.FromContext(ctx).Info("removing the objects of manifests the component no longer applies", "component", c.Name)
		if _, err := Prune(ctx, cl, ownerOptions(env, c), fromStatusInventory(st.Inventory).Entries); err != nil {
			return fmt.Errorf("removing the component's former manifests: %w", err)
		}
		st.Inventory, st.AppliedDigest = nil, ""
		e.book().forget(appliedKey(string(env.UID), c.Name))
	}
	if st.Release == nil {
		return nil
	}
	if c.Helm != nil {
		name, ns := releasePlace(env, c)
		if name == st.Release.Name && ns == st.Release.Namespace {
			return nil
		}
	}
	log.FromContext(ctx).Info("uninstalling a release the component no longer deploys", "component", c.Name,
		"release", st.Release.Name, "namespace", st.Release.Namespace)
	if err := e.uninstallRelease(ctx, env, c, t, st.Release.Name, st.Release.Namespace, "DevEnvironment "+env.Name+": component "+c.Name+" moved"); err != nil {
		return err
	}
	st.Release = nil
	e.book().forget(appliedKey(string(env.UID), c.Name))
	return nil
}

// finalizeComponent uninstalls the component's release or prunes its
// inventory. What is already gone (a namespace deleted by hand) is skipped.
// Both kinds are removed, as status records them (a component switched
// from one to the other may have left either); with no status, the
// release the spec names.
func (e *Engine) finalizeComponent(ctx context.Context, env *v1alpha1.DevEnvironment, c *v1alpha1.Component, st *v1alpha1.ComponentStatus, t *identity.Tenant) error {
	hasRelease := (st != nil && st.Release != nil) || c.Helm != nil
	hasObjects := st != nil && len(st.Inventory) > 0
	e.book().forget(appliedKey(string(env.UID), c.Name))
	if !hasRelease && !hasObjects {
		return nil
	}
	if _, err := t.User(); err != nil {
		// With no identity nothing was deployed either: an environment
		// that stalled for want of a ServiceAccount must still go away.
		log.FromContext(ctx).Info("nothing to remove: no identity to deploy as", "component", c.Name)
		return nil
	}
	cl, err := t.Client()
	if err != nil {
		return err
	}
	if hasRelease {
		// The release status names what was installed, even if the spec
		// has since moved it; the spec's is removed too, in case the
		// process died between installing it and recording it.
		var places [][2]string
		if st != nil && st.Release != nil {
			places = append(places, [2]string{st.Release.Name, st.Release.Namespace})
		}
		if c.Helm != nil {
			if name, ns := releasePlace(env, c); len(places) == 0 || places[0] != [2]string{name, ns} {
				places = append(places, [2]string{name, ns})
			}
		}
		for _, p := range places {
			log.FromContext(ctx).Info("uninstalling helm release", "component", c.Name, "release", p[0], "namespace", p[1])
			if err := e.uninstallRelease(ctx, env, c, t, p[0], p[1], "DevEnvironment "+env.Name+" deleted"); err != nil {
				return err
			}
		}
	}
	if hasObjects {
		_, err = Prune(ctx, cl, ownerOptions(env, c), fromStatusInventory(st.Inventory).Entries)
	}
	return err
}

// ownerOptions say who applies for component c of env: the label is the
// environment's name (a valid label value by the CRD's name rules), the
// owner annotation its namespace and name. Prune only deletes what they
// name.
func ownerOptions(env *v1alpha1.DevEnvironment, c *v1alpha1.Component) ApplyOptions {
	return ApplyOptions{Environment: v1alpha1.LabelValue(env.Name), Component: c.Name, Owner: env.Namespace + "/" + env.Name}
}

// applyOptions are ownerOptions for e's applies: a CRD applied is told to
// e's Helm discoveries.
func (e *Engine) applyOptions(env *v1alpha1.DevEnvironment, c *v1alpha1.Component) ApplyOptions {
	opts := ownerOptions(env, c)
	opts.CRDApplied = e.helmReleases().CRDApplied
	return opts
}

// deployError maps the package's fault classes: a permanent fault
// (forbidden, invalid objects) stalls the environment until the spec or
// the cluster's RBAC changes; anything else is retried.
func deployError(err error) error {
	return fault.StallPermanent(v1alpha1.ReasonDeployFailed, err)
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

func (e *Engine) maxReleaseFailures() int {
	if e.MaxReleaseFailures > 0 {
		return e.MaxReleaseFailures
	}
	return DefaultMaxReleaseFailures
}

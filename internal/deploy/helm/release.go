package helm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"

	"github.com/devloop-dev/devloop/internal/fault"
)

// Action is one Helm step ReconcileRelease may take.
type Action string

const (
	ActionInstall   Action = "install"
	ActionUpgrade   Action = "upgrade"
	ActionRollback  Action = "rollback"
	ActionUninstall Action = "uninstall"
	// ActionUnlock marks a release left pending-* (by a process that died
	// mid-action) failed, so Helm accepts the next action. It runs only
	// once the pending revision is stale (see lockExpiry): until then the
	// call ends with a *ReleaseLockedError.
	ActionUnlock Action = "unlock"
)

// Defaults for zero ReleaseRequest fields.
const (
	DefaultMaxHistory = 5
	DefaultMaxActions = 5
)

// ReleaseRequest is the desired state of one release.
type ReleaseRequest struct {
	// Configs builds the Helm configuration (identity, storage).
	Configs     ConfigFactory
	ReleaseName string
	Namespace   string
	Chart       *chart.Chart
	// Values are the composed values (see deploy.ComposeValues).
	Values map[string]any
	// Timeout bounds each action. It is also how long a pending revision
	// that this process did not write is left alone after it started
	// (plus lockGrace): someone else's helm action may still be running.
	Timeout time.Duration
	// Writer, when set (NewWriter: the process is its lease's elected
	// leader), is stamped on every revision (WriterLabel); a pending
	// revision another leader of the same lease left is unlocked at once.
	Writer          string
	CreateNamespace bool
	// Mutate, when set, edits rendered objects before they are applied,
	// hooks included.
	Mutate Mutator
	// Patches, when set, are applied to the rendered objects, hooks
	// included, before Mutate (see releaseRender).
	Patches Patcher
	// CheckHooks, when set, is told the objects of a revision's hooks
	// before Helm runs any of them (when the action stores the revision
	// pending): an error stops the action there. Helm deletes an existing
	// object named like a hook before creating the hook
	// (before-hook-creation, its default), so this is where a hook named
	// like someone else's object must be refused (see hookRenderDriver).
	CheckHooks HookFunc
	// SkipCRDs installs without the chart's crds/.
	SkipCRDs bool
	// RenderKey is anything else that changes the rendered release, such
	// as the image mapping Mutate applies; it is part of the digest.
	RenderKey string
	// MaxHistory caps stored revisions; MaxActions caps the actions of
	// one call.
	MaxHistory int
	MaxActions int
	// Owner, when set, is stored with the release (OwnerLabel): a release
	// with another owner is refused (NotOwnedError) before any action.
	Owner string
	// BeforeAction, when set, is told each action before it runs: an
	// action may take minutes (hooks, waits), and status must say the
	// release is changing meanwhile.
	BeforeAction func(Action)
}

// Outcome is what ReconcileRelease did.
type Outcome struct {
	// Actions taken, in order; empty when the release was up to date.
	Actions []Action
	// Release is the latest revision after the call (zero when none).
	Release ReleaseInfo
	// Observed lists every revision written during the call.
	Observed []ReleaseInfo
	// Last is the latest stored revision as the call last read it, when
	// it ended in sync (nil otherwise): the caller reads its objects
	// without listing the history again.
	Last *Revision
	// Digest of chart, values and render key: "sha256:<hex>".
	Digest string
	// Failure and FailedAction say which action failed last and how;
	// FailureNone when the call ended with the release deployed and up
	// to date.
	Failure      Failure
	FailedAction Action
}

// Changed reports whether the call wrote anything.
func (o Outcome) Changed() bool { return len(o.Actions) > 0 }

// state is what the stored history says about a release.
type state int

const (
	stateAbsent       state = iota // nothing stored: install
	stateInSync                    // deployed with the desired digest: nothing
	stateOutOfSync                 // deployed, other digest: upgrade
	stateLocked                    // pending-*: unlock
	stateFailedNoGood              // failed with no good revision to go back to: uninstall
	stateFailed                    // failed with a good revision: roll back to it
)

var nextAction = map[state]Action{
	stateAbsent:       ActionInstall,
	stateOutOfSync:    ActionUpgrade,
	stateLocked:       ActionUnlock,
	stateFailedNoGood: ActionUninstall,
	stateFailed:       ActionRollback,
}

// Reconcile brings the release to the desired chart and values as
// a state machine: determine the state from storage, pick one action, run
// it, and repeat, at most MaxActions times and never the same action twice
// in one call, so a failed upgrade is rolled back once and not retried in
// a loop. Retrying across calls is the caller's decision: it counts the
// Outcome's failures (a failing hook becomes permanent once it gives up).
//
// The error is fault.Permanent for a Forbidden from the API server (the
// verb and resource named), fault.Unavailable when the API server cannot
// be reached, and a plain error for other failures of the last action.
func (r *Releases) Reconcile(ctx context.Context, req ReleaseRequest) (Outcome, error) {
	cfg, err := req.Configs(req.Namespace)
	if err != nil {
		return Outcome{Digest: releaseDigest(req)}, err
	}
	render := newReleaseRender(req)
	if render != nil {
		cfg.Releases.Driver = hookRenderDriver{Driver: cfg.Releases.Driver, render: render, ctx: ctx}
	}
	if req.Writer != "" {
		cfg.Releases.Driver = writerDriver{Driver: cfg.Releases.Driver, writer: req.Writer}
	}
	obs := NewObserver(cfg.Releases.Driver)
	cfg.Releases.Driver = obs
	out, err := reconcileRelease(ctx, cfg, req, render, r.written)
	out.Observed = obs.Observed()
	r.written.record(out.Observed)
	return out, err
}

// lockGrace is added to the action timeout before a pending revision
// someone else wrote counts as stale: Helm writes the final status after
// the timeout fires.
const lockGrace = time.Minute

// ReleaseLockedError says a release is pending-* by an action that may
// still be running (someone's helm upgrade, or an operator process that
// died less than the timeout ago): it is left alone until Until.
type ReleaseLockedError struct {
	Namespace, Name string
	Revision        int
	Status          string
	Since, Until    time.Time
}

func (e *ReleaseLockedError) Error() string {
	return fmt.Sprintf("helm release %s/%s revision %d is %s since %s: another helm action may be running; devloop unlocks it if it is still %s at %s",
		e.Namespace, e.Name, e.Revision, e.Status, e.Since.UTC().Format(time.RFC3339), e.Status, e.Until.UTC().Format(time.RFC3339))
}

// lockExpiry is when the pending revision last may be unlocked. A
// revision this process wrote and is no longer acting on (reconciles of a
// release are serialized: one owner, one reconcile at a time) was left by
// an action that ended without finishing, and may be unlocked at once.
// So may one a previous leader of this process's lease wrote
// (leftByAnotherLeader). Any other — someone's helm command, or an
// operator process that ran without leader election — only once the
// action timeout and lockGrace have passed since it started.
func lockExpiry(cfg *action.Configuration, last *release.Release, timeout time.Duration, writer string, written *revisionBook) time.Time {
	if written.wrote(last) || leftByAnotherLeader(last, writer) {
		return time.Time{}
	}
	if obs, ok := cfg.Releases.Driver.(*Observer); ok {
		// Written by an action of this very call, which has returned.
		for _, ri := range obs.Observed() {
			if ri.Namespace == last.Namespace && ri.Name == last.Name && ri.Revision == last.Version {
				return time.Time{}
			}
		}
	}
	since := last.Info.LastDeployed.Time
	if since.IsZero() {
		since = last.Info.FirstDeployed.Time
	}
	if timeout <= 0 {
		timeout = defaultActionTimeout
	}
	return since.Add(timeout + lockGrace)
}

// defaultActionTimeout is Helm's own default action timeout.
const defaultActionTimeout = 5 * time.Minute

// revisionBook remembers, per release, the latest revision an operator
// wrote.
type revisionBook struct {
	mu     sync.Mutex
	latest map[string]int
}

// An operator's book is Releases.written: a restart forgets it, so a
// revision left pending by a previous process waits out the timeout.

// record notes the newest revision of each release among one call's
// writes (a reinstall starts again at 1, so it replaces what was known).
func (b *revisionBook) record(observed []ReleaseInfo) {
	newest := map[string]int{}
	for _, ri := range observed {
		key := ri.Namespace + "/" + ri.Name
		if ri.Name != "" && ri.Revision > newest[key] {
			newest[key] = ri.Revision
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for key, v := range newest {
		b.latest[key] = v
	}
}

// forget drops a release that is gone (uninstalled with its history).
func (b *revisionBook) forget(namespace, name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.latest, namespace+"/"+name)
}

func (b *revisionBook) wrote(rls *release.Release) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.latest[rls.Namespace+"/"+rls.Name] == rls.Version
}

func reconcileRelease(ctx context.Context, cfg *action.Configuration, req ReleaseRequest, render *releaseRender, written *revisionBook) (Outcome, error) {
	out := Outcome{Digest: releaseDigest(req)}

	opts := ActionOptions{
		ReleaseName:     req.ReleaseName,
		Namespace:       req.Namespace,
		Timeout:         req.Timeout,
		CreateNamespace: req.CreateNamespace,
		SkipCRDs:        req.SkipCRDs,
		MaxHistory:      orDefaultInt(req.MaxHistory, DefaultMaxHistory),
		Labels:          releaseLabels(req, out.Digest),
		// Helm's schema check validates nothing against an API server
		// that supports field validation (every supported one, 1.27+):
		// kubectl's ParamVerifyingSchema only asks whether the server
		// could validate, and validates client side when it could not.
		// Asking costs a fetch and parse of the OpenAPI v2 document and
		// one v3 document per group version, on every action (150–200 ms
		// of each upgrade here). The API server still rejects invalid
		// objects when they are applied.
		SkipSchemaCheck: true,
	}
	if render != nil {
		opts.PostRenderer = render
	}
	done := map[Action]bool{}
	var lastErr error
	for range orDefaultInt(req.MaxActions, DefaultMaxActions) {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		st, last, good, err := determineState(cfg, req.ReleaseName, digestLabel(out.Digest))
		out.Release = infoOf(last)
		if err != nil {
			out.Failure, err = classifyHelm("reading release history", err)
			return out, err
		}
		if last != nil && req.Owner != "" && !ReleaseOwnedBy(last, req.Owner) {
			out.Release = ReleaseInfo{}
			return out, fault.Permanent(&NotOwnedError{Namespace: req.Namespace, Name: req.ReleaseName, Owner: last.Labels[OwnerLabel]})
		}
		act, ok := nextAction[st]
		if !ok { // in sync
			out.Last = revisionOf(last)
			return out, lastErr
		}
		if act == ActionUnlock {
			if until := lockExpiry(cfg, last, req.Timeout, req.Writer, written); time.Now().Before(until) {
				return out, &ReleaseLockedError{Namespace: req.Namespace, Name: req.ReleaseName, Revision: last.Version,
					Status: string(last.Info.Status), Since: last.Info.LastDeployed.Time, Until: until}
			}
		}
		if done[act] {
			// The action that would come next already ran in this call:
			// stop and leave the retry to the caller.
			if lastErr == nil {
				lastErr = fmt.Errorf("release %s/%s: %s needed again in one reconcile", req.Namespace, req.ReleaseName, act)
			}
			return out, lastErr
		}
		done[act] = true
		out.Actions = append(out.Actions, act)
		if req.BeforeAction != nil {
			req.BeforeAction(act)
		}
		err = runAction(ctx, cfg, act, req, opts, last, good)
		if err == nil {
			continue
		}
		out.FailedAction = act
		out.Failure, lastErr = classifyHelm(act, err)
		if taken := takenObject(err, req.ReleaseName, req.Namespace); taken != nil {
			// Another release's object (or no release's): no retry
			// changes whose it is.
			out.Failure, lastErr = FailureAction, fault.Permanent(fmt.Errorf("%s: %w", act, taken))
		}
		if out.Failure == FailureForbidden || out.Failure == FailureUnavailable || fault.IsPermanent(lastErr) {
			// Remediation cannot help: it would fail the same way.
			if last, err := LastRelease(cfg, req.ReleaseName); err == nil {
				out.Release = infoOf(last)
			}
			return out, lastErr
		}
	}
	if lastErr == nil {
		lastErr = fmt.Errorf("release %s/%s: not converged after %v", req.Namespace, req.ReleaseName, out.Actions)
	}
	return out, lastErr
}

// runAction runs one action; last is the latest stored revision and good
// the revision to roll back to.
func runAction(ctx context.Context, cfg *action.Configuration, act Action, req ReleaseRequest, opts ActionOptions, last *release.Release, good int) error {
	switch act {
	case ActionInstall:
		_, err := Install(ctx, cfg, req.Chart, req.Values, opts)
		return err
	case ActionUpgrade:
		_, err := Upgrade(ctx, cfg, req.Chart, req.Values, opts)
		return err
	case ActionRollback:
		return Rollback(cfg, good, opts)
	case ActionUninstall:
		_, err := Uninstall(cfg, opts)
		return err
	case ActionUnlock:
		// As Flux does: the process that held the lock is gone, so the
		// pending revision is recorded as failed and remediated like one.
		last.SetStatus(release.StatusFailed, fmt.Sprintf("Release unlocked from stale state %s", last.Info.Status))
		return cfg.Releases.Update(last)
	}
	return fmt.Errorf("unknown action %q", act)
}

// determineState reads the release history. good is the revision a
// rollback goes to: the latest deployed one, else the latest superseded.
func determineState(cfg *action.Configuration, name, digest string) (state, *release.Release, int, error) {
	last, err := LastRelease(cfg, name)
	if err != nil || last == nil {
		return stateAbsent, nil, 0, err
	}
	switch last.Info.Status {
	case release.StatusDeployed:
		if last.Labels[DigestLabel] == digest {
			return stateInSync, last, last.Version, nil
		}
		return stateOutOfSync, last, last.Version, nil
	case release.StatusPendingInstall, release.StatusPendingUpgrade, release.StatusPendingRollback:
		return stateLocked, last, 0, nil
	case release.StatusUninstalling, release.StatusUninstalled:
		// Finish (or purge) the uninstall; install follows.
		return stateFailedNoGood, last, 0, nil
	}
	// failed, superseded, unknown: go back to a good revision if any.
	hist, err := cfg.Releases.History(name)
	if err != nil {
		return stateAbsent, last, 0, err
	}
	good := goodRevision(hist)
	if good == 0 {
		return stateFailedNoGood, last, 0, nil
	}
	return stateFailed, last, good, nil
}

func goodRevision(hist []*release.Release) int {
	best := map[release.Status]int{}
	for _, r := range hist {
		if s := r.Info.Status; (s == release.StatusDeployed || s == release.StatusSuperseded) && r.Version > best[s] {
			best[s] = r.Version
		}
	}
	if v := best[release.StatusDeployed]; v > 0 {
		return v
	}
	return best[release.StatusSuperseded]
}

// Digest is the digest of what req installs (see releaseDigest): the
// Outcome's, and the one an in-sync release is labelled with.
func (req ReleaseRequest) Digest() string { return releaseDigest(req) }

// releaseDigest hashes what the release is made from: every chart in the
// tree (metadata, templates, files, default values, schema), the values
// and the render key. Equal digests render equal releases.
func releaseDigest(req ReleaseRequest) string {
	h := sha256.New()
	var walk func(c *chart.Chart)
	walk = func(c *chart.Chart) {
		b, _ := json.Marshal(struct {
			M *chart.Metadata
			T []*chart.File
			F []*chart.File
			V map[string]any
			S []byte
		}{c.Metadata, c.Templates, c.Files, c.Values, c.Schema})
		h.Write(b)
		deps := append([]*chart.Chart(nil), c.Dependencies()...)
		sort.Slice(deps, func(i, j int) bool { return deps[i].Name() < deps[j].Name() })
		for _, d := range deps {
			walk(d)
		}
	}
	if req.Chart != nil {
		walk(req.Chart)
	}
	vals, _ := json.Marshal(req.Values)
	h.Write(vals)
	h.Write([]byte("\x00" + req.RenderKey))
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// digestLabel shortens a digest to fit a label value (63 characters).
func digestLabel(digest string) string {
	const n = 48 // hex characters: 192 bits
	hexPart := digest[len("sha256:"):]
	return hexPart[:n]
}

func orDefaultInt(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

// releaseLabels are the labels stored with every revision: the digest of
// what it installs and, when set, its owner.
func releaseLabels(req ReleaseRequest, digest string) map[string]string {
	labels := map[string]string{DigestLabel: digestLabel(digest)}
	if req.Owner != "" {
		labels[OwnerLabel] = req.Owner
	}
	return labels
}

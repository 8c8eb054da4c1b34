package source

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/digest"
	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/internal/identity"
	"github.com/devloop-dev/devloop/internal/memo"
	"github.com/devloop-dev/devloop/internal/timeline"
)

// Resolver is the sources step: it turns every source of an environment
// into an immutable reference once per interval, and gives the engines a
// reconcile's sources (Sources) whose content is fetched at most once. It
// is made once and shared by every reconcile.
type Resolver struct {
	// Fetcher resolves and fetches; nil fetches nothing (every image that
	// needs a source then fails, naming it).
	Fetcher *Fetcher

	resolved memo.Map[resolution]
}

// Sources are one reconcile's sources of one environment (Resolved):
// references as resolved, content fetched at most once.
type Sources struct {
	r      *Resolver
	env    *v1alpha1.DevEnvironment
	tenant *identity.Tenant
	// refs are the resolved sources by name, set by Resolve.
	refs map[string]Ref
	// artifacts are the sources fetched during this reconcile.
	artifacts map[string]*Artifact
	// unpushed are the sources whose tag is not pushed yet, by name, set
	// by Resolve (Unpushed).
	unpushed map[string]*fault.WaitingError
}

// Begin starts one reconcile's sources of env; nothing is resolved until
// Resolve. A nil Resolver gives sources that fetch nothing.
func (r *Resolver) Begin(env *v1alpha1.DevEnvironment, tenant *identity.Tenant) *Sources {
	return &Sources{r: r, env: env, tenant: tenant}
}

// defaultSourceInterval is how often a moving reference is resolved again
// when the spec says nothing; the CRD defaults it to the same value.
const defaultSourceInterval = time.Minute

// resolution is a source's last resolved reference, kept in memory so a
// branch or tag is asked about once per interval and not on every
// reconcile. An operator restart resolves again, which costs one request
// per source.
type resolution struct {
	// spec is a hash of the source's spec: an edited source resolves at once.
	spec string
	// request is the reconcile-request annotation seen at resolution: a new
	// value (what `kubectl devloop push` writes) resolves at once.
	request string
	ref     Ref
	at      time.Time
}

// Resolve turns every source into an immutable reference: a branch
// into a commit, a tag into a digest. A reference resolved less than an
// interval ago is reused, unless the source's spec changed or a reconcile
// was requested since. Nothing is downloaded here; content is fetched when a
// build needs it.
// It returns how soon a moving reference is due to be resolved again
// (zero: never).
func (s *Sources) Resolve(ctx context.Context) (time.Duration, error) {
	r := s.r
	if r == nil || r.Fetcher == nil {
		return 0, nil
	}
	var next time.Duration
	now := time.Now()
	request := s.env.Annotations[v1alpha1.ReconcileRequestAnnotation]
	s.refs = map[string]Ref{}
	s.unpushed = nil
	var kept []v1alpha1.SourceStatus
	for i := range s.env.Spec.Sources {
		src := s.env.Spec.Sources[i]
		if src.Output != nil {
			// A build's output has no revision until the build: what it
			// last pushed, if anything, read again when a component asks
			// (outputRef).
			st := sourceStatus(s.env, src.Name)
			if ref, ok := OutputRef(s.env, src); ok {
				s.refs[src.Name] = ref
				setOutputStatus(&st, ref)
			}
			kept = append(kept, st)
			continue
		}
		interval := defaultSourceInterval
		if src.Interval != nil && src.Interval.Duration > 0 {
			interval = src.Interval.Duration
		}
		key := memo.Key(s.env.UID, src.Name)
		specHash := digest.JSON(src)
		last, ok := r.resolved.Get(key)
		st := sourceStatus(s.env, src.Name)
		// A pinned commit or digest names the same content for as long
		// as the spec says so: resolved once (a short SHA is expanded,
		// which may take a full fetch), not every interval.
		stale := now.Sub(last.at) >= interval && !pinned(src)
		if !ok || last.spec != specHash || last.request != request || stale {
			log.FromContext(ctx).V(1).Info("resolving source", "source", src.Name)
			fetcher, err := s.fetcherFor(src)
			var ref Ref
			if err == nil {
				ref, err = fetcher.Resolve(ctx, s.env.Namespace, src)
			}
			if waiting, ok := waitingForPush(s.env, i, err); ok {
				// Only what reads this source waits for its push: the
				// others go on resolving, and their components on
				// building and deploying (Unpushed).
				if s.unpushed == nil {
					s.unpushed = map[string]*fault.WaitingError{}
				}
				s.unpushed[src.Name] = waiting
				if next == 0 || waiting.RequeueAfter < next {
					next = waiting.RequeueAfter
				}
				kept = append(kept, st)
				continue
			}
			if err != nil {
				// What the other sources last resolved stays in status.
				for _, rest := range s.env.Spec.Sources[i:] {
					kept = append(kept, sourceStatus(s.env, rest.Name))
				}
				s.env.Status.Sources = kept
				return next, sourceError(fieldError(s.env, src.Name, err))
			}
			changed := !ok || last.spec != specHash || last.request != request || last.ref.Key() != ref.Key()
			if last.ref.Key() != ref.Key() || st.Revision == "" {
				// New content: its digest is known once fetched (git) or
				// already (OCI, Flux).
				st.Digest = ref.Digest
			}
			last = resolution{spec: specHash, request: request, ref: ref, at: now}
			r.resolved.Put(key, last)
			if changed || st.LastResolveTime == nil {
				// The same answer at the interval is not news: stamping
				// it would write status on every interval of every idle
				// environment.
				st.LastResolveTime = &metav1.Time{Time: now}
			}
		}
		st.Revision = last.ref.Revision
		s.refs[src.Name] = last.ref
		if due := max(last.at.Add(interval).Sub(now), time.Second); !pinned(src) && (next == 0 || due < next) {
			next = due
		}
		kept = append(kept, st)
	}
	s.env.Status.Sources = kept
	// What this resolution names stays in the store; what an earlier one
	// named may be collected.
	refs := make([]Ref, 0, len(s.refs))
	for _, ref := range s.refs {
		refs = append(refs, ref)
	}
	r.Fetcher.UsingIn(s.env.Namespace, s.env.UID, refs...)
	return next, nil
}

// outputRef brings an output source's reference up to what the producing
// image's status records now: a build earlier in this reconcile may have
// pushed a new output, which the components after it deploy at once.
// Content fetched for the previous one is dropped from the reconcile's
// memory (the store keeps it).
func (s *Sources) outputRef(name string) {
	src := s.env.Spec.Source(name)
	if src == nil || src.Output == nil {
		return
	}
	ref, ok := OutputRef(s.env, *src)
	if !ok || s.refs[name] == ref {
		return
	}
	if s.refs == nil {
		s.refs = map[string]Ref{}
	}
	s.refs[name] = ref
	delete(s.artifacts, name)
	for i := range s.env.Status.Sources {
		if s.env.Status.Sources[i].Name == name {
			setOutputStatus(&s.env.Status.Sources[i], ref)
			return
		}
	}
	st := v1alpha1.SourceStatus{Name: name}
	setOutputStatus(&st, ref)
	s.env.Status.Sources = append(s.env.Status.Sources, st)
}

// setOutputStatus records an output source's reference in its status
// entry: "<image>/<output>@sha256:…" and the digest, stamped when it
// changes.
func setOutputStatus(st *v1alpha1.SourceStatus, ref Ref) {
	if st.Revision == ref.Revision && st.Digest == ref.Digest {
		return
	}
	st.Revision, st.Digest = ref.Revision, ref.Digest
	st.LastResolveTime = &metav1.Time{Time: time.Now()}
}

// pinned says whether a source names immutable content.
func pinned(src v1alpha1.Source) bool {
	return (src.Git != nil && src.Git.Ref != nil && src.Git.Ref.Commit != "") ||
		(src.OCI != nil && src.OCI.Digest != "")
}

// fieldError prefixes a source's error with its field in the spec
// ("spec.sources[1].git"), so a Stalled condition says what to fix.
func fieldError(env *v1alpha1.DevEnvironment, name string, err error) error {
	for i, src := range env.Spec.Sources {
		if src.Name != name {
			continue
		}
		kind := "sourceRef"
		switch {
		case src.Git != nil:
			kind = "git"
		case src.OCI != nil:
			kind = "oci"
		case src.Output != nil:
			kind = "output"
		}
		return fmt.Errorf("spec.sources[%d].%s: %w", i, kind, err)
	}
	return err
}

// Forget drops what is remembered of a deleted environment's
// sources: its resolutions, and its share of the store (entries nobody
// else uses are removed).
func (r *Resolver) Forget(env types.UID) {
	if r == nil {
		return
	}
	r.resolved.Forget(env)
	if r.Fetcher != nil {
		r.Fetcher.Forget(env)
	}
}

// artifact fetches the content of a source for an in-process build, once
// per reconcile and once per content (the fetcher's store keeps it, and
// serves it to an environment only once its own credentials passed the
// origin's access check), and records its digest in status.
func (s *Sources) artifact(ctx context.Context, name string) (*Artifact, error) {
	s.outputRef(name)
	if a, ok := s.artifacts[name]; ok {
		return a, nil
	}
	var src v1alpha1.Source
	for _, x := range s.env.Spec.Sources {
		if x.Name == name {
			src = x
		}
	}
	ref, ok := s.refs[name]
	if !ok && src.Output != nil {
		return nil, fieldError(s.env, name, fmt.Errorf("image %s has not pushed output %s yet: it is deployed once that image is built", src.Output.Image, src.Output.Name))
	}
	if !ok {
		return nil, fmt.Errorf("source %q is not resolved", name)
	}
	if src.Output != nil {
		// Fetched as the oci source it is, with the registry's
		// credentials.
		src = OutputOrigin(s.env, src, ref)
	}
	fetcher, err := s.fetcherFor(src)
	if err != nil {
		return nil, err
	}
	creds, err := LoadCredentials(ctx, fetcher.Reader, s.env.Namespace, src)
	if err != nil {
		return nil, sourceError(fieldError(s.env, name, err))
	}
	// The store is shared by every environment: Serve checks this
	// environment's own access to the origin before handing out content.
	fetching := time.Now()
	a, err := s.r.Fetcher.ServeIn(ctx, s.env.Namespace, s.env.UID, ref, creds)
	if err != nil {
		timeline.Mark(timeline.OfEnvironment(ctx), timeline.Fetch, fetching)
		return nil, sourceError(fieldError(s.env, name, err))
	}
	if s.artifacts == nil {
		s.artifacts = map[string]*Artifact{}
	}
	s.artifacts[name] = a
	fetched := true
	for i := range s.env.Status.Sources {
		st := &s.env.Status.Sources[i]
		if st.Name != name {
			continue
		}
		fetched = st.Digest != a.Digest
		if fetched {
			st.Digest = a.Digest
			st.LastFetchTime = &metav1.Time{Time: time.Now()}
		}
	}
	// Only the fetch that brought this content is the change's Fetch:
	// the reconciles that follow (a rollout, Ready) serve it from the
	// store, and the timeline merges same-named steps, so marking them
	// stretched Fetch over the whole change. The download itself is one:
	// it comes after the sources step resolved the new revision (and
	// recorded it), when the first build reads the content, and was left
	// out of the change's Fetch, as unaccounted time before the assembly.
	if fetched || a.Downloaded {
		timeline.Mark(timeline.OfEnvironment(ctx), timeline.Fetch, fetching)
	}
	return a, nil
}

// sourceStatus returns a copy of a source's status entry, or a new one.
func sourceStatus(env *v1alpha1.DevEnvironment, name string) v1alpha1.SourceStatus {
	for _, st := range env.Status.Sources {
		if st.Name == name {
			return st
		}
	}
	return v1alpha1.SourceStatus{Name: name}
}

// fetcherFor is the fetcher for src: one that reads Secrets and Flux
// objects as the environment's ServiceAccount when src names any (so a
// source cannot name what that ServiceAccount may not read), the
// operator's otherwise — a public source needs no identity.
func (s *Sources) fetcherFor(src v1alpha1.Source) (*Fetcher, error) {
	names := src.SourceRef != nil || (src.Git != nil && src.Git.SecretRef != nil) || (src.OCI != nil && src.OCI.SecretRef != nil)
	if !names {
		return s.r.Fetcher, nil
	}
	c, err := s.tenant.Client()
	if err != nil {
		return nil, err
	}
	return s.r.Fetcher.ReadingWith(c), nil
}

// sourceError maps a source failure: a permanent one stalls the
// environment (reason SourceFailed); anything else is retried.
func sourceError(err error) error {
	return fault.StallPermanent(v1alpha1.ReasonSourceFailed, err)
}

// Ref is a source's reference as resolved; an output source's is brought
// up to what its producing image pushed last (outputRef).
func (s *Sources) Ref(name string) (Ref, bool) {
	s.outputRef(name)
	ref, ok := s.refs[name]
	return ref, ok
}

// Artifact is a source's content, fetched once per reconcile.
func (s *Sources) Artifact(ctx context.Context, name string) (*Artifact, error) {
	if s.r == nil || s.r.Fetcher == nil {
		return nil, fault.Stalledf(v1alpha1.ReasonSourceFailed, "source %q: this operator fetches no sources", name)
	}
	return s.artifact(ctx, name)
}

package controllers

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
	"github.com/devloop-dev/devloop/internal/memo"
	"github.com/devloop-dev/devloop/internal/source"
)

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
	ref     source.Ref
	at      time.Time
}

// resolveSources turns every source into an immutable reference: a branch
// into a commit, a tag into a digest. A reference resolved less than an
// interval ago is reused, unless the source's spec changed or a reconcile
// was requested since. Nothing is downloaded here; content is fetched when a
// build needs it.
func (r *DevEnvironmentReconciler) resolveSources(ctx context.Context, s *scope) error {
	if r.Sources == nil {
		return nil
	}
	now := time.Now()
	request := s.env.Annotations[v1alpha1.ReconcileRequestAnnotation]
	s.refs = map[string]source.Ref{}
	var kept []v1alpha1.SourceStatus
	for i := range s.env.Spec.Sources {
		src := s.env.Spec.Sources[i]
		if src.Output != nil {
			// A build's output has no revision until the build: what it
			// last pushed, if anything, read again when a component asks
			// (outputRef).
			st := sourceStatus(s.env, src.Name)
			if ref, ok := source.OutputRef(s.env, src); ok {
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
			fetcher, err := r.fetcherFor(s, src)
			var ref source.Ref
			if err == nil {
				ref, err = fetcher.Resolve(ctx, s.env.Namespace, src)
			}
			if err != nil {
				// What the other sources last resolved stays in status.
				for _, rest := range s.env.Spec.Sources[i:] {
					kept = append(kept, sourceStatus(s.env, rest.Name))
				}
				s.env.Status.Sources = kept
				return sourceError(fieldError(s.env, src.Name, err))
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
		if !pinned(src) {
			s.requeueWithin(last.at.Add(interval).Sub(now))
		}
		kept = append(kept, st)
	}
	s.env.Status.Sources = kept
	// What this resolution names stays in the store; what an earlier one
	// named may be collected.
	refs := make([]source.Ref, 0, len(s.refs))
	for _, ref := range s.refs {
		refs = append(refs, ref)
	}
	r.Sources.Using(s.env.UID, refs...)
	return nil
}

// outputRef brings an output source's reference up to what the producing
// image's status records now: a build earlier in this reconcile may have
// pushed a new output, which the components after it deploy at once.
// Content fetched for the previous one is dropped from the reconcile's
// memory (the store keeps it).
func (s *scope) outputRef(name string) {
	src := s.env.Spec.Source(name)
	if src == nil || src.Output == nil {
		return
	}
	ref, ok := source.OutputRef(s.env, *src)
	if !ok || s.refs[name] == ref {
		return
	}
	if s.refs == nil {
		s.refs = map[string]source.Ref{}
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
func setOutputStatus(st *v1alpha1.SourceStatus, ref source.Ref) {
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

// forgetSources drops what is remembered of a deleted environment's
// sources: its resolutions, and its share of the store (entries nobody
// else uses are removed).
func (r *DevEnvironmentReconciler) forgetSources(env types.UID) {
	r.resolved.Forget(env)
	if r.Sources != nil {
		r.Sources.Forget(env)
	}
}

// artifact fetches the content of a source for an in-process build, once
// per reconcile and once per content (the fetcher's store keeps it, and
// serves it to an environment only once its own credentials passed the
// origin's access check), and records its digest in status.
func (r *DevEnvironmentReconciler) artifact(ctx context.Context, s *scope, name string) (*source.Artifact, error) {
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
		src = source.OutputOrigin(s.env, src, ref)
	}
	fetcher, err := r.fetcherFor(s, src)
	if err != nil {
		return nil, err
	}
	creds, err := source.LoadCredentials(ctx, fetcher.Reader, s.env.Namespace, src)
	if err != nil {
		return nil, sourceError(fieldError(s.env, name, err))
	}
	// The store is shared by every environment: Serve checks this
	// environment's own access to the origin before handing out content.
	a, err := r.Sources.Serve(ctx, s.env.UID, ref, creds)
	if err != nil {
		return nil, sourceError(fieldError(s.env, name, err))
	}
	if s.artifacts == nil {
		s.artifacts = map[string]*source.Artifact{}
	}
	s.artifacts[name] = a
	for i := range s.env.Status.Sources {
		st := &s.env.Status.Sources[i]
		if st.Name == name && st.Digest != a.Digest {
			st.Digest = a.Digest
			st.LastFetchTime = &metav1.Time{Time: time.Now()}
		}
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
func (r *DevEnvironmentReconciler) fetcherFor(s *scope, src v1alpha1.Source) (*source.Fetcher, error) {
	names := src.SourceRef != nil || (src.Git != nil && src.Git.SecretRef != nil) || (src.OCI != nil && src.OCI.SecretRef != nil)
	if !names {
		return r.Sources, nil
	}
	c, err := s.tenant.Client()
	if err != nil {
		return nil, err
	}
	return r.Sources.ReadingWith(c), nil
}

// sourceError maps a source failure: a permanent one stalls the
// environment (reason SourceFailed); anything else is retried.
func sourceError(err error) error {
	if fault.IsPermanent(err) {
		return fault.Stalled(v1alpha1.ReasonSourceFailed, err)
	}
	return err
}

// resolvedSources gives the engines this reconcile's sources
// (source.Resolved): references as resolved, content fetched at most once.
type resolvedSources struct {
	r *DevEnvironmentReconciler
	s *scope
}

func (rs resolvedSources) Ref(name string) (source.Ref, bool) {
	rs.s.outputRef(name)
	return rs.s.Ref(name)
}

func (rs resolvedSources) Artifact(ctx context.Context, name string) (*source.Artifact, error) {
	if rs.r.Sources == nil {
		return nil, fault.Stalledf(v1alpha1.ReasonSourceFailed, "source %q: this operator fetches no sources", name)
	}
	return rs.r.artifact(ctx, rs.s, name)
}

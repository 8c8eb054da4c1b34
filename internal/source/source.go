// Package source resolves and fetches the inputs of a DevEnvironment: git
// repositories, OCI artifacts and Flux source-controller artifacts.
//
// Resolving is cheap and turns a moving reference (a branch, a tag) into an
// immutable Ref; fetching downloads the content a Ref names into a local
// directory, once per content. The same code runs in the operator and in the
// init container of builder and test pods (`devloop helper fetch`), which
// receives the Ref as JSON so it fetches exactly what the operator resolved,
// with the environment's own Secret, into a store of its own.
//
// # The shared store
//
// The operator's store is shared by every environment, so content is keyed
// by what was verified and served only after a check:
//
//   - A git entry is keyed by the full 40-hex commit and the repository URL
//     it was fetched from; a short SHA in the spec is expanded to the full
//     commit when resolving (from the server's advertised refs, else by a
//     full fetch into a private staging directory) and is never a key. An
//     OCI entry is keyed by its full digest and the registry and
//     repository it came from, a Flux entry by its digest and URL: naming
//     a known digest at another origin (a registry that answers any HEAD
//     with it) fetches from that origin, which must deliver the content.
//   - Serve hands an entry to one environment only after that environment's
//     own credentials were accepted by the origin that filled it (the
//     origin is part of the key): git ls-remote of the URL, an OCI
//     manifest HEAD of the digest in the repository; an OCI entry this
//     environment fills itself is fetched with those credentials, the
//     manifest by digest first, which is the same check (a denial there
//     is the asker's, not remembered as the content's). A Flux artifact's
//     Ref exists only once the environment's impersonated reader could read
//     the Flux object, which is its check. A positive check is remembered
//     per environment, entry and credentials Secret resourceVersion for
//     Fetcher.AccessTTL; a refusal is a fault.Permanent error and no content.
//
// The store is bounded (Fetcher.MaxStoreBytes) and collects garbage. Sizes
// count every path, hard links included, at its full size plus a small
// overhead. An entry is in use, and never evicted, while it is being
// written or read by a Fetch or Serve, and while it is the current content
// of a live environment's source that was served it: what its latest
// resolution named (Fetcher.Using) or what it was last served. Everything else may go, least
// recently used first, entries no environment uses before the others. Each
// environment is charged for the entries it was served, and the
// environments of one namespace together up to Fetcher.MaxEnvBytes: to
// admit one more, the namespace's own least recently used entries that no
// environment uses go first, and if its sources in use alone exceed the
// share, the fetch fails with a fault.Permanent error naming the source.
// Fetches in progress count against the store's bound as they write, a
// refused fetch is remembered (refusals.go) and each fetch has a deadline
// (Fetcher.Timeout). Forget (an environment was deleted) drops its charges and
// removes the entries nobody else uses; entries no environment was charged
// for (after an operator restart) go after an hour unused.
package source

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/egress"
	"github.com/devloop-dev/devloop/internal/fault"
)

// Kind is the kind of a source.
type Kind string

const (
	KindGit Kind = "git"
	KindOCI Kind = "oci"
	// KindArtifact is a tarball served over HTTP with a known digest: a
	// Flux source-controller artifact.
	KindArtifact Kind = "artifact"
)

// Ref is a resolved, immutable reference to a source's content. It is JSON
// so it can be handed to a helper container.
type Ref struct {
	// Source is the source's name in the spec.
	Source string `json:"source"`
	Kind   Kind   `json:"kind"`
	// URL is the git URL, the OCI repository, or the artifact's URL. It
	// becomes the org.opencontainers.image.source label of built images.
	URL string `json:"url"`
	// Revision is what status shows: "main@sha1:<commit>",
	// "dev@sha256:<hex>", or a Flux artifact's revision.
	Revision string `json:"revision"`
	// ID is what tag templates render as {{ .Revision }}: the commit SHA for
	// git (also for a Flux GitRepository artifact), the digest hex
	// otherwise.
	ID string `json:"id"`
	// Digest is "sha256:<hex>": for OCI the manifest digest, for a Flux
	// artifact the artifact's digest, for git the digest of the fetched tree
	// (known only after Fetch; empty from Resolve).
	Digest string `json:"digest,omitempty"`
	// Commit is the git commit to check out (git only).
	Commit string `json:"commit,omitempty"`
	// Insecure allows plain HTTP to an OCI registry (OCI only).
	Insecure bool `json:"insecure,omitempty"`
}

// Key identifies the content a Ref names: the commit for git, the digest
// otherwise. Resolve gives only full commits and digests.
func (r Ref) Key() string {
	if r.Kind == KindGit {
		return "git-" + r.Commit
	}
	return r.Digest
}

// storeKey is the store entry of a Ref: what was verified when it was
// filled, which is the content and where it came from. Content is served
// only to those who may read the origin it was fetched from, and an
// access check of one origin proves nothing about content fetched from
// another (issue 31: a registry that answers every HEAD with someone
// else's digest), so every entry is keyed by its origin as well: a git
// commit by the repository URL, an OCI digest by the registry and
// repository (and scheme), a Flux artifact's digest by its URL.
func (r Ref) storeKey() string {
	sum := sha256.Sum256([]byte(r.origin()))
	origin := hex.EncodeToString(sum[:8])
	switch r.Kind {
	case KindGit:
		return "git-" + r.Commit + "-" + origin
	case KindOCI:
		return "oci-" + r.Digest + "-" + origin
	}
	return "artifact-" + r.Digest + "-" + origin
}

// origin is where a Ref's content comes from, in a canonical form for
// OCI (index.docker.io/library/x and x are one repository).
func (r Ref) origin() string {
	if r.Kind != KindOCI {
		return r.URL
	}
	repo, err := parseRepository(r.URL, r.Insecure)
	if err != nil {
		return r.URL
	}
	scheme := "https"
	if r.Insecure {
		scheme = "http"
	}
	return scheme + "://" + repo.Name()
}

// Artifact is fetched content on local disk.
type Artifact struct {
	Ref
	// Dir holds the extracted content. Consumers must not modify it: it is
	// shared by every build that uses the same content.
	Dir string
	// Prebuilt are the artifact's mapped layers (see MappedLayer), their
	// blobs kept beside Dir, as immutable as it.
	Prebuilt []PrebuiltLayer
	// Downloaded says this call brought the content into the store; false
	// when it was served from there.
	Downloaded bool
}

// Credentials authenticate to a git server or an OCI registry. They are
// never logged and never leave the process except into the helper pod's
// mounted Secret.
type Credentials struct {
	// Username and Password for HTTPS git or registry basic auth.
	Username, Password string
	// SSHIdentity is a private key for SSH git; KnownHosts checks the
	// server.
	SSHIdentity, KnownHosts []byte
	// DockerConfigJSON is a .dockerconfigjson document for OCI sources.
	DockerConfigJSON []byte
	// Version is the resourceVersion of the Secret they were read from
	// (empty from a mounted Secret): a positive access check is remembered
	// only for these credentials.
	Version string
}

// Fetcher resolves and fetches sources.
type Fetcher struct {
	// Reader reads Secrets and Flux source objects. Nil in helper pods.
	Reader client.Reader
	// Root is the directory of the content store.
	Root string
	// HTTP is the client for artifact downloads and OCI registries.
	HTTP *http.Client
	// Egress is the policy every connection to a git server, registry or
	// artifact server is checked against (see internal/egress); nil checks
	// nothing (helper pods, in the tenant's network).
	Egress *egress.Policy
	// Timeout bounds one resolve or fetch.
	Timeout time.Duration
	// MaxSize bounds the extracted size of one source, in bytes.
	MaxSize int64
	// MaxStoreBytes bounds the store; zero is unbounded (a helper pod's
	// private store).
	MaxStoreBytes int64
	// MaxEnvBytes bounds what the environments of one namespace (one
	// environment, when its namespace is not known: Serve rather than
	// ServeIn) are charged for in the store; zero is half of
	// MaxStoreBytes.
	MaxEnvBytes int64
	// AccessTTL is how long a positive access check is trusted; zero is
	// DefaultAccessTTL.
	AccessTTL time.Duration
	// Flush writes each entry to disk before it is stored and trusts it in
	// any boot: for a store on a volume that outlives the node (moved with
	// the operator to another node). Off, an entry is trusted only in the
	// boot that wrote it, which saves the flush on every fetch.
	Flush bool
	// Store is what the process knows of the store at Root (NewStore);
	// nil: one made on first use. Copies of f share it.
	Store *Store
}

// ReadingWith is f reading Secrets and Flux objects with r instead: a
// client acting as the environment's ServiceAccount, so a source can name
// only what that ServiceAccount may read. The content store is shared.
func (f *Fetcher) ReadingWith(r client.Reader) *Fetcher {
	f.store() // made before the copy, so the copy shares it
	c := *f
	c.Reader = r
	return &c
}

// Resolve turns a source of the spec into an immutable Ref: it asks the git
// server which commit a branch or tag names, the registry which digest a
// tag names, or reads a Flux object's status.artifact. Nothing is
// downloaded. Secrets are read from namespace.
func (f *Fetcher) Resolve(ctx context.Context, namespace string, src v1alpha1.Source) (Ref, error) {
	ctx, cancel := context.WithTimeoutCause(f.withEgress(ctx), f.timeout(), errFetchDeadline)
	defer cancel()
	switch {
	case src.Git != nil:
		return f.resolveGit(ctx, namespace, src)
	case src.OCI != nil:
		return f.resolveOCI(ctx, namespace, src)
	case src.SourceRef != nil:
		return f.resolveFlux(ctx, namespace, src)
	}
	return Ref{}, fault.Permanentf("source %q: none of git, oci or sourceRef is set", src.Name)
}

// Fetch makes the content of ref available on disk, downloading it only
// when the store does not hold it yet, and verifies its digest. creds may
// be nil.
//
// Fetch does not check access before serving what the store holds: it is
// for a store private to one environment (a helper pod's). The operator's
// shared store is read through Serve.
func (f *Fetcher) Fetch(ctx context.Context, ref Ref, creds *Credentials) (*Artifact, error) {
	ctx, cancel := context.WithTimeoutCause(f.withEgress(ctx), f.timeout(), errFetchDeadline)
	defer cancel()
	ref, s, fill, err := f.prepare(ref, creds)
	if err != nil {
		return nil, err
	}
	return f.stored(ctx, s, ref, fill, "", servedTo{})
}

// Serve is Fetch for the environment env of a store shared between
// environments: it first checks with env's own credentials that the origin
// grants it the content (see the package doc), then serves the entry,
// charging it to env.
func (f *Fetcher) Serve(ctx context.Context, env types.UID, ref Ref, creds *Credentials) (*Artifact, error) {
	return f.ServeIn(ctx, "", env, ref, creds)
}

// ServeIn is Serve for an environment of namespace: what it is served
// counts against the namespace's share of the store (Fetcher.MaxEnvBytes),
// which all of the namespace's environments share, so several of them
// cannot fill the store for everyone else.
func (f *Fetcher) ServeIn(ctx context.Context, namespace string, env types.UID, ref Ref, creds *Credentials) (*Artifact, error) {
	if f.Root != "" && namespace != "" {
		st := f.state()
		st.mu.Lock()
		st.setNamespace(env, namespace)
		st.mu.Unlock()
	}
	if env == "" {
		return nil, errors.New("source: Serve needs the requesting environment")
	}
	ctx, cancel := context.WithTimeoutCause(f.withEgress(ctx), f.timeout(), errFetchDeadline)
	defer cancel()
	ref, s, fill, err := f.prepare(ref, creds)
	if err != nil {
		return nil, err
	}
	// An entry the store holds is served after an access check with env's
	// credentials; one that is not there is filled with them, which is
	// that check (a change's new content is always such a fill: the check
	// before it was a round trip to the registry on the path of every
	// change).
	to := servedTo{
		check:  func() error { return f.checkAccess(ctx, env, s, ref, creds) },
		filled: func() { f.granted(env, ref, creds) },
	}
	if ref.Kind != KindOCI {
		// Only an OCI fill tells a denied manifest from refused content
		// (accessFailure): the others are checked first.
		if err := to.check(); err != nil {
			return nil, err
		}
	}
	return f.stored(ctx, s, ref, fill, env, to)
}

// prepare checks a Ref and picks how to fill its entry.
func (f *Fetcher) prepare(ref Ref, creds *Credentials) (Ref, subject, filler, error) {
	var s subject
	switch ref.Kind {
	case KindGit:
		s = subject{ref.Source, "git", redactURL(ref.URL)}
		ref.Commit = strings.ToLower(ref.Commit)
		if !fullCommit.MatchString(ref.Commit) {
			// A short SHA is expanded by Resolve; as a key it would let
			// anyone pre-seed a colliding prefix.
			return ref, s, nil, s.permanent("invalid commit %q: a full 40-hex commit is needed", ref.Commit)
		}
		return ref, s, f.fetchGit(s, ref, creds), nil
	case KindOCI:
		s = subject{ref.Source, "oci", ref.URL}
		if !strings.HasPrefix(ref.Digest, "sha256:") {
			return ref, s, nil, s.permanent("invalid manifest digest %q", ref.Digest)
		}
		return ref, s, f.fetchOCI(s, ref, creds), nil
	case KindArtifact:
		s = subject{ref.Source, "artifact", ref.URL}
		return ref, s, f.fetchArtifact(s, ref), nil
	}
	return ref, s, nil, fault.Permanentf("source %q: unknown kind %q", ref.Source, ref.Kind)
}

// LoadCredentials reads the Secret a source refers to (nil when it refers
// to none).
//
// A Secret that is missing, or lacks the keys its source needs (username
// and password, or identity and known_hosts, for git; .dockerconfigjson for
// OCI), is a fault.Permanent error that names the Secret and the key,
// never a value.
func LoadCredentials(ctx context.Context, r client.Reader, namespace string, src v1alpha1.Source) (*Credentials, error) {
	return loadCredentials(ctx, r, namespace, src)
}

// CredentialsFromDir reads credentials from a mounted Secret volume, as the
// helper container sees them.
//
// The files are named after the Secret's keys; absent keys are simply
// absent files.
func CredentialsFromDir(dir string) (*Credentials, error) {
	return credentialsFromDir(dir)
}

// errFetchDeadline is the cause of a resolve or fetch cut by its own
// deadline (Fetcher.Timeout), not by the reconcile's: a source that
// trickles its content (a tarpit) holds a reconcile worker that long at
// most, and, remembered, once per backoff (refusals.go).
var errFetchDeadline = errors.New("source deadline exceeded")

// Defaults for a zero Fetcher field.
const (
	DefaultTimeout   = 2 * time.Minute
	DefaultMaxSize   = 1 << 30
	DefaultAccessTTL = 10 * time.Minute
)

func (f *Fetcher) timeout() time.Duration {
	if f.Timeout > 0 {
		return f.Timeout
	}
	return DefaultTimeout
}

func (f *Fetcher) maxSize() int64 {
	if f.MaxSize > 0 {
		return f.MaxSize
	}
	return DefaultMaxSize
}

func (f *Fetcher) httpClient() *http.Client {
	if f.HTTP != nil {
		return f.HTTP
	}
	return f.Egress.Client(f.timeout())
}

// Resolved is what one reconcile resolved and fetched, by source name:
// the engines read sources through it, so each is fetched at most once
// per reconcile.
type Resolved interface {
	// Ref is a source's resolved reference; false when it is not resolved.
	Ref(name string) (Ref, bool)
	// Artifact fetches a source's content.
	Artifact(ctx context.Context, name string) (*Artifact, error)
}

// Package image assembles container images with go-containerregistry and
// pushes them to a registry. No Docker daemon is involved: an image is a
// base image plus one reproducible layer per layer mapping plus a config,
// held as immutable go-containerregistry values until pushed.
//
// It knows nothing of builds as Kubernetes work: internal/build orchestrates
// it for an environment's components, and the tooling (internal/olm,
// internal/operatorimage, internal/devcluster) uses it alone. Two paths
// share it:
//   - in-process (an image without a run step): Builder.Build resolves the
//     base, assembles every platform from a fetched source directory,
//     pushes and tags;
//   - in a builder pod (an image with a run step): `manager helper
//     assemble` calls Assemble and PushImage on the workspace the builder
//     command wrote and reports the digest; the operator then calls Publish
//     to make the index and move the tags.
//
// Pushes are ordered so no tag ever names a half-written image: blobs, then
// the manifest by digest, then (for several platforms) the index, then the
// tags, all naming the one digest.
package image

import (
	"context"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/egress"
	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/internal/source"
)

// Registry is where images are pushed.
type Registry struct {
	// Prefix is prepended to image names ("localhost:5000/team-a").
	Prefix string
	// PullPrefix is how nodes name the same registry; empty means Prefix.
	PullPrefix string
	// Insecure allows plain HTTP. Without it every request is HTTPS, also to
	// localhost and private addresses (go-containerregistry would otherwise
	// fall back to HTTP for those on its own).
	Insecure bool
	// Keychain authenticates pushes and pulls; nil is anonymous.
	Keychain authn.Keychain
	// Compression of source layers: gzip, none, or (auto, the zero
	// value) none for a registry source.LocalRegistry names and gzip for
	// any other.
	Compression source.Compression
}

// Spec is what to build: an image of the environment's spec with its
// source resolved.
type Spec struct {
	// Name of the image in the spec; the repository is Prefix/Name.
	Name string
	// Base is the base image reference (tag or digest); empty is scratch.
	Base string
	// BaseInsecure allows plain HTTP to the base image's registry.
	BaseInsecure bool `json:",omitempty"`
	// Platforms as "os/arch[/variant]"; empty means linux/amd64. More than
	// one produces an image index.
	Platforms []string
	// Layers map source paths (files or directories) to image paths.
	Layers []v1alpha1.LayerMapping
	// Config of the image.
	Entrypoint, Cmd []string
	Env             []v1alpha1.EnvVar
	WorkingDir      string
	User            string
	// SourceURL and Revision become the org.opencontainers.image.source and
	// org.opencontainers.image.revision labels.
	SourceURL, Revision string
	// Prebuilt are the source's mapped layers; a layer that is byte for
	// byte one of them is not hashed, and its blob is mounted from
	// SourceRepository (the source's OCI repository) instead of uploaded.
	Prebuilt         []source.PrebuiltLayer
	SourceRepository string
	// LivePaths are images[].liveUpdate.paths: the image gets the live
	// update supervisor and its live paths become links into the pod's
	// live root (liveupdate_layer.go).
	LivePaths []string `json:",omitempty"`
}

// Result is what a build pushed.
type Result struct {
	// Repository pushed to (Prefix/Name).
	Repository string
	// Digest of the image, or of the index for several platforms.
	Digest string
	// ContentHash is the hex of Digest: the manifest is a hash of the base,
	// every layer and the config, and builds are reproducible, so the same
	// inputs give the same hash on any machine. It is always pushed as a tag
	// (the content tag).
	ContentHash string
	// Tags that name Digest after the push: the content tag first, then the
	// rendered templates, without duplicates.
	Tags []string
	// Uploaded counts the blobs (layers and configs) actually uploaded;
	// blobs the registry already had are not counted.
	Uploaded int
	// Pushed reports whether anything was written (a blob, a manifest or a
	// tag); false when the registry already held all of it.
	Pushed bool
	// MovedFrom names, for each rendered tag that named another digest
	// before this push moved it, that digest.
	MovedFrom map[string]string
	// Image is the image pushed as Digest, as assembled here (nil for an
	// index of several platforms): its layers are read from the source
	// content it was made of, not from the registry, for as long as that
	// content stays on disk (the reconcile that built it).
	Image v1.Image
}

// Builder builds and pushes images to one registry. Its remote options are
// built once; it is safe for concurrent use.
type Builder struct {
	reg Registry
	// prefix is reg.Prefix without a trailing slash.
	prefix string
	// registryHost is the host[:port] of prefix, the one host allowed plain
	// HTTP when reg.Insecure.
	registryHost string
	insecure     bool
	// nameOpts parse references to the environment's registry.
	nameOpts []name.Option
	// remoteOpts are the go-containerregistry options of every request:
	// transport (scheme guard, upload counter), keychain, retries.
	remoteOpts []remote.Option
	// puller is kept for the life of the Builder, so the registry's auth
	// handshake is done once per repository; it holds no state that could
	// go stale, unlike a pusher (see newPusher).
	puller *remote.Puller
	// cacheDir holds base image layers on disk, one cache per origin
	// (baseCache); empty without WithCacheDir.
	cacheDir string
	// compressed remembers layer blob digests by diff ID.
	compressed compressedDigests
	// uncompressed pushes source layers as plain tars: the registry is
	// local (source.LocalRegistry), where gzip costs more than it saves.
	uncompressed bool
	// guard refuses plain HTTP to registries not marked insecure.
	guard *schemeGuard
	// supervisor is the binary live-updatable images get; empty is the
	// running binary.
	supervisor string
}

// Option configures a Builder.
type Option func(*options)

type options struct {
	transport http.RoundTripper
	cacheDir  string
	// retryBackoff replaces go-containerregistry's retries (1s, 3s);
	// tests of failing registries set a fast one.
	retryBackoff *remote.Backoff
	// supervisor is the binary live-updatable images get (WithSupervisor).
	supervisor string
}

// WithTransport sets the HTTP transport under go-containerregistry's own
// (auth, retries); tests use it to count requests.
func WithTransport(rt http.RoundTripper) Option { return func(o *options) { o.transport = rt } }

// WithCacheDir caches base image layers on disk, so a base is downloaded
// once per digest and repository.
func WithCacheDir(dir string) Option { return func(o *options) { o.cacheDir = dir } }

// NewBuilder returns a Builder for reg.
func NewBuilder(reg Registry, opts ...Option) (*Builder, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	prefix := strings.TrimSuffix(reg.Prefix, "/")
	if prefix == "" {
		return nil, fault.Permanentf("registry prefix is empty")
	}
	var nameOpts []name.Option
	if reg.Insecure {
		nameOpts = append(nameOpts, name.Insecure)
	}
	// A repository under the prefix shows whether the prefix is valid and
	// which registry host it names.
	probe, err := name.NewRepository(prefix+"/image", nameOpts...)
	if err != nil {
		return nil, fault.Permanentf("registry prefix %q is not a valid repository prefix: %v", reg.Prefix, err)
	}

	b := &Builder{
		reg:          reg,
		prefix:       prefix,
		registryHost: probe.RegistryStr(),
		insecure:     reg.Insecure,
		nameOpts:     nameOpts,
		uncompressed: reg.Compression.For(probe.RegistryStr()) == source.CompressionNone,
		supervisor:   o.supervisor,
	}
	base := o.transport
	if base == nil {
		// No policy (a helper pod, in the tenant's network): the shared
		// transport with the same dial, TLS and response header timeouts,
		// so a hung registry is reported as unavailable instead of
		// holding a reconcile until its context ends.
		base = (*egress.Policy)(nil).Transport()
	}
	guard := &schemeGuard{next: &uploadCounter{next: base}}
	if reg.Insecure {
		guard.plainHTTPHost = b.registryHost
	}
	b.guard = guard
	b.remoteOpts = []remote.Option{remote.WithTransport(guard), remote.WithUserAgent("devloop")}
	if reg.Keychain != nil {
		b.remoteOpts = append(b.remoteOpts, remote.WithAuthFromKeychain(reg.Keychain))
	}
	if o.retryBackoff != nil {
		b.remoteOpts = append(b.remoteOpts, remote.WithRetryBackoff(*o.retryBackoff))
	}
	if b.puller, err = remote.NewPuller(b.remoteOpts...); err != nil {
		return nil, err
	}
	b.cacheDir = o.cacheDir
	return b, nil
}

// Repository is where image name is pushed: Prefix/name.
func (b *Builder) Repository(name string) string {
	return b.prefix + "/" + name
}

// PullReference is how nodes pull a pushed digest: PullPrefix (or Prefix)
// /name@digest.
func (b *Builder) PullReference(name, digest string) string {
	prefix := strings.TrimSuffix(b.reg.PullPrefix, "/")
	if prefix == "" {
		prefix = b.prefix
	}
	return prefix + "/" + name + "@" + digest
}

// repository parses the repository of image name.
func (b *Builder) repository(image string) (name.Repository, error) {
	repo, err := name.NewRepository(b.Repository(image), b.nameOpts...)
	if err != nil {
		return name.Repository{}, fault.Permanentf("image %s: %q is not a valid repository: %v", image, b.Repository(image), err)
	}
	return repo, nil
}

// ResolveBase asks the registry which digest the base reference names now
// (one HEAD request, no download). Empty base is scratch and resolves to "".
func (b *Builder) ResolveBase(ctx context.Context, base string, insecure bool) (string, error) {
	if base == "" {
		return "", nil
	}
	ref, err := b.parseBase(base, insecure)
	if err != nil {
		return "", fault.Permanentf("base image %q is not a valid reference: %v", base, err)
	}
	desc, err := b.puller.Head(ctx, ref)
	if err != nil {
		return "", baseError(err, "", base)
	}
	return desc.Digest.String(), nil
}

// Build assembles img from the source content in dir for every platform,
// computes its content hash, renders tags with render (given the content
// hash), and pushes what the registry does not hold yet: blobs, the
// manifest(s), the index, then the tags. dir may be empty when img has no
// layers.
func (b *Builder) Build(ctx context.Context, img Spec, dir string, render func(contentHash string) ([]string, error)) (*Result, error) {
	p, err := b.Prepare(ctx, img, dir, render)
	if err != nil {
		return nil, err
	}
	return p.Push(ctx)
}

// finish computes the content hash of top, renders the tags and publishes.
func (b *Builder) finish(ctx context.Context, image string, repo name.Repository, top pushable, render func(string) ([]string, error)) (*Result, error) {
	p, err := b.prepared(image, repo, top, render)
	if err != nil {
		return nil, err
	}
	return p.Push(ctx)
}

// Assemble builds img for one platform from dir, without pushing: the base
// for that platform, one layer per mapping (fixed timestamps, sorted
// entries, numeric owners 0:0 unless the mapping says otherwise), and the
// config. The builder Job's helper calls it on the workspace.
func (b *Builder) Assemble(ctx context.Context, img Spec, platform string, dir string) (v1.Image, error) {
	var list []string
	if platform != "" {
		list = []string{platform}
	}
	images, err := b.assemblePlatforms(ctx, img, list, dir)
	if err != nil {
		return nil, err
	}
	return images[0].image, nil
}

// assemblePlatforms builds img for each platform (linux/amd64 when none)
// from the layers in dir on the fetched base.
func (b *Builder) assemblePlatforms(ctx context.Context, img Spec, list []string, dir string) ([]platformImage, error) {
	platforms, err := parsePlatforms(img.Name, list)
	if err != nil {
		return nil, err
	}
	// The base's manifest and configs are fetched while the layers are
	// hashed and compressed: neither needs the other, and on a cold build
	// each is a good part of the wait before the upload.
	type fetched struct {
		bases []v1.Image
		err   error
	}
	basesCh := make(chan fetched, 1)
	go func() {
		bases, err := b.basesFor(ctx, img, platforms)
		basesCh <- fetched{bases, err}
	}()
	layers, err := b.sourceLayers(img, dir)
	bases := <-basesCh
	if err != nil {
		return nil, err
	}
	if bases.err != nil {
		return nil, bases.err
	}
	images, err := assembleAll(bases.bases, img, layers, platforms)
	if err != nil {
		return nil, err
	}
	return b.withSupervisor(img, images)
}

// PushImage pushes one image by digest (blobs, then the manifest) without
// tagging it, and returns its digest and the number of blobs uploaded.
func (b *Builder) PushImage(ctx context.Context, name string, image v1.Image) (v1.Hash, int, error) {
	repo, err := b.repository(name)
	if err != nil {
		return v1.Hash{}, 0, err
	}
	return b.pushByDigest(ctx, repo, image)
}

// Publish finishes a build whose platform images are already pushed by
// digest (by builder Jobs): for several platforms it pushes an index of
// them, then it moves the content tag and the rendered tags to the result.
// platforms maps "os/arch" to the pushed manifest digest.
func (b *Builder) Publish(ctx context.Context, name string, platforms map[string]v1.Hash, render func(contentHash string) ([]string, error)) (*Result, error) {
	repo, err := b.repository(name)
	if err != nil {
		return nil, err
	}
	top, err := b.pushedIndex(ctx, name, repo, platforms)
	if err != nil {
		return nil, err
	}
	return b.finish(ctx, name, repo, top, render)
}

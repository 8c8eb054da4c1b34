// Package build assembles container images with go-containerregistry and
// pushes them to the environment's registry. No Docker daemon is involved:
// an image is a base image plus one reproducible layer per layer mapping
// plus a config, held as immutable go-containerregistry values until pushed.
//
// Two paths share this package:
//   - in-process (an image without a run step): Builder.Build resolves the
//     base, assembles every platform from a fetched source directory,
//     pushes and tags, all in the operator;
//   - builder Job (an image with a run step): the Job's main container
//     (`devloop helper assemble`) calls Assemble and PushImage on the
//     workspace the builder command wrote and reports the digest; the
//     operator then calls Publish to make the index and move the tags.
//
// Pushes are ordered so no tag ever names a half-written image: blobs, then
// the manifest by digest, then (for several platforms) the index, then the
// tags, all naming the one digest.
package build

import (
	"context"
	"net/http"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
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
}

// Image is what to build: an image of the spec with its source resolved.
type Image struct {
	// Name of the image in the spec; the repository is Prefix/Name.
	Name string
	// Base is the base image reference (tag or digest); empty is scratch.
	Base string
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
}

// Builder builds and pushes images to one registry. Its remote options are
// built once; it is safe for concurrent use.
type Builder struct {
	// filled by NewBuilder
}

// Option configures a Builder.
type Option func(*options)

type options struct {
	transport http.RoundTripper
	cacheDir  string
}

// WithTransport sets the HTTP transport under go-containerregistry's own
// (auth, retries); tests use it to count requests.
func WithTransport(rt http.RoundTripper) Option { return func(o *options) { o.transport = rt } }

// WithCacheDir caches base image layers on disk, so a base is downloaded
// once per digest.
func WithCacheDir(dir string) Option { return func(o *options) { o.cacheDir = dir } }

// NewBuilder returns a Builder for reg.
func NewBuilder(reg Registry, opts ...Option) (*Builder, error) {
	panic("not implemented")
}

// Repository is where image name is pushed: Prefix/name.
func (b *Builder) Repository(name string) string {
	panic("not implemented")
}

// PullReference is how nodes pull a pushed digest: PullPrefix (or Prefix)
// /name@digest.
func (b *Builder) PullReference(name, digest string) string {
	panic("not implemented")
}

// ResolveBase asks the registry which digest the base reference names now
// (one HEAD request, no download). Empty base is scratch and resolves to "".
func (b *Builder) ResolveBase(ctx context.Context, base string) (string, error) {
	panic("not implemented")
}

// Build assembles img from the source content in dir for every platform,
// computes its content hash, renders tags with render (given the content
// hash), and pushes what the registry does not hold yet: blobs, the
// manifest(s), the index, then the tags. dir may be empty when img has no
// layers.
func (b *Builder) Build(ctx context.Context, img Image, dir string, render func(contentHash string) ([]string, error)) (*Result, error) {
	panic("not implemented")
}

// Assemble builds img for one platform from dir, without pushing: the base
// for that platform, one layer per mapping (fixed timestamps, sorted
// entries, numeric owners 0:0 unless the mapping says otherwise), and the
// config. The builder Job's helper calls it on the workspace.
func (b *Builder) Assemble(ctx context.Context, img Image, platform string, dir string) (v1.Image, error) {
	panic("not implemented")
}

// PushImage pushes one image by digest (blobs, then the manifest) without
// tagging it, and returns its digest and the number of blobs uploaded.
func (b *Builder) PushImage(ctx context.Context, name string, image v1.Image) (v1.Hash, int, error) {
	panic("not implemented")
}

// Publish finishes a build whose platform images are already pushed by
// digest (by builder Jobs): for several platforms it pushes an index of
// them, then it moves the content tag and the rendered tags to the result.
// platforms maps "os/arch" to the pushed manifest digest.
func (b *Builder) Publish(ctx context.Context, name string, platforms map[string]v1.Hash, render func(contentHash string) ([]string, error)) (*Result, error) {
	panic("not implemented")
}

// KeychainFromDockerConfig returns a keychain of the auths in a
// .dockerconfigjson document (a kubernetes.io/dockerconfigjson Secret).
func KeychainFromDockerConfig(data []byte) (authn.Keychain, error) {
	panic("not implemented")
}

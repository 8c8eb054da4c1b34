// Package build builds an environment's images: Engine (engine*.go)
// decides, per image of a component, whether its inputs changed, and builds
// it in one of three ways, all assembling and pushing with internal/image:
//   - in-process (an image without a run step): image.Builder.Build on the
//     fetched source, in the operator;
//   - builder Job (an image with a run step): a Job per platform whose last
//     container (`manager helper assemble`) assembles and pushes the
//     workspace the builder command wrote and reports the digest; the
//     operator then publishes the index and moves the tags;
//   - warm builder (run.keepWarm): the same steps as processes exec'd into
//     a pod that stays up between builds.
//
// Unchanged inputs build nothing, and a build's result (digest, content,
// revision and other tags) is recorded in the image's status.
package build

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/digest"
	"github.com/devloop-dev/devloop/internal/engine"
	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/internal/identity"
	"github.com/devloop-dev/devloop/internal/image"
	"github.com/devloop-dev/devloop/internal/memo"
	"github.com/devloop-dev/devloop/internal/plan"
	"github.com/devloop-dev/devloop/internal/pods"
	"github.com/devloop-dev/devloop/internal/source"
	"github.com/devloop-dev/devloop/internal/timeline"
)

// Options configures how the engine builds images.
type Options struct {
	// HelperImage is the operator's own image, run by builder pods for
	// fetching sources and pushing images. Images with a run step need it.
	HelperImage string
	// BaseCacheDir caches base image layers on disk; empty disables it.
	BaseCacheDir string
	// Supervisor is the static binary live-updatable images get at
	// /.devloop/supervisor (WithSupervisor); empty: the running binary.
	// Tests, whose binary is not static, set it.
	Supervisor string
	// Transport is the HTTP transport to registries; tests count requests
	// with it. Nil is the default transport.
	Transport http.RoundTripper
	// BaseInterval is how often a base image tag is resolved again; one
	// minute when zero.
	BaseInterval time.Duration
	// VerifyInterval is how often an image built from unchanged inputs is
	// checked to still be in the registry; five minutes when zero.
	VerifyInterval time.Duration
	// Compression of built layers, in process and in builder pods; the
	// zero value is auto (see image.Registry).
	Compression source.Compression
	// MaxBuildTimeout caps a run step's run.timeout, in builder Jobs and
	// warm builders alike; DefaultMaxBuildTimeout when zero.
	MaxBuildTimeout time.Duration
	// TeamCache turns on the team build cache for builder pods; nil: off.
	TeamCache *TeamCacheOptions
}

// PodExecutor runs a command in a container of a running pod as the
// tenant (identity.Tenant.Exec does); tests script it.
type PodExecutor interface {
	Exec(ctx context.Context, t *identity.Tenant, namespace, pod, container string, command []string, stdout, stderr io.Writer) error
}

// Engine builds components' images end to end: unchanged inputs do
// nothing, images without a run step are assembled in-process, images
// with one by builder Jobs or in warm builder pods. It is made once and
// shared by every reconcile.
type Engine struct {
	Options Options
	// Cache reads builder Jobs (the operator watches the Jobs it owns).
	Cache client.Reader
	// APIReader lists builder pods straight from the API server.
	APIReader client.Reader
	// LogsFor, when set, gives the reader of an environment's builder pod
	// logs acting as its tenant (pods.TenantLogs): the tail of a failed
	// build is shown in status. Logs is used when it is nil (tests without
	// a kubelet); both nil leave failed builds without a tail.
	LogsFor func(t *identity.Tenant) (pods.LogReader, error)
	// Logs reads builder pod logs as the operator.
	Logs pods.LogReader
	// Exec runs builds in warm builders; nil execs as the tenant.
	Exec PodExecutor
	// Events records ImagePushed; nil records nothing.
	Events events.EventRecorder
	// PushBehind lets a live-updatable build be pushed while the live
	// update engine, which runs next and joins the push (Publishing),
	// syncs it into the pods (pushbehind.go). Without it every build is
	// pushed before the build step returns.
	PushBehind bool

	recent memo.Map[memoEntry]
	// progress is the running builder Jobs' last counts (progress.go).
	progress memo.Map[jobsProgress]
	// disruptions is what a running builder Job's disrupted pod said,
	// by Job UID, kept after the pod is gone (disrupted.go).
	disruptions memo.Map[string]
	warmOnce    sync.Once
	warm        *warmBuilds
	// jobFailures counts builder Jobs that failed in a row for a
	// registry down or past their timeout (engine_retries.go).
	jobFailures memo.Counts[failuresInARow]
	// noSuchHosts counts builds that found a registry host that does not
	// resolve.
	noSuchHosts noSuchHosts
}

// Wake reports environments whose warm build ended, so the controller
// reconciles them at once.
func (e *Engine) Wake() <-chan event.GenericEvent { return e.warmBuilds().wake }

func (e *Engine) warmBuilds() *warmBuilds {
	e.warmOnce.Do(func() { e.warm = newWarmBuilds() })
	return e.warm
}

// imageBuilds is one reconcile's builds of one environment (sessionFor): the
// registry client (and its credentials) is made once and only when a
// registry must be asked, so a no-op reconcile does neither.
type imageBuilds struct {
	e       *Engine
	env     *v1alpha1.DevEnvironment
	tenant  *identity.Tenant
	sources source.Resolved
	builder *image.Builder

	// next is when something must be looked at again even if nothing
	// changes (a base tag to resolve, a push to verify), and whether a
	// build waits for what no event reports (a warm builder pod
	// starting).
	next engine.Result
	// progress, when set, is told before an image is built, so status
	// can say so while the build runs.
	progress func(message string)
	// assembled are the images this reconcile built in-process, by name
	// and digest, as assembled here: the live update that follows reads
	// their layers from the source content instead of from the registry
	// (assembled.go).
	assembled assembledImages
	// pushing are the in-process builds being pushed while the live
	// update syncs them (pushbehind.go).
	pushing pushesBehind
	// tagOwners names, by digest, the environments whose tags the tag
	// guard found this reconcile (tag_owner.go), for the TagMoved event.
	tagOwners map[string]string
}

// buildImages brings every image of a component to its inputs. It
// returns false and what it waits for while a builder runs. Errors are
// fault-classified: Stalled (reason BuildFailed, InvalidSpec, Forbidden)
// until the spec changes, Unavailable while the registry is down.
func (s *imageBuilds) buildImages(ctx context.Context, c *v1alpha1.Component, st *v1alpha1.ComponentStatus) (bool, string, error) {
	done := true
	// Every image's word, not only the last one's: an image waiting for
	// another's builder says so next to the one it waits for.
	var messages []string
	for i := range c.Images {
		img := &c.Images[i]
		ist := imageStatus(st, img.Name)
		ok, msg, err := s.buildImage(ctx, c, img, ist, st)
		if err != nil {
			return false, "", err
		}
		if !ok {
			done = false
			if msg != "" {
				messages = append(messages, msg)
			}
		}
	}
	pruneImageStatus(st, c)
	return done, strings.Join(messages, "; "), nil
}

// buildImage works out one image's inputs and has its backend build it
// (backendFor: which backend, and the policies around it, are chosen
// there, not here).
func (s *imageBuilds) buildImage(ctx context.Context, c *v1alpha1.Component, img *v1alpha1.ImageSpec, ist *v1alpha1.ImageStatus, st *v1alpha1.ComponentStatus) (bool, string, error) {
	ctx = timeline.InComponent(ctx, img.Name)
	var ref source.Ref
	if img.Source != "" {
		var ok bool
		if ref, ok = s.sources.Ref(img.Source); !ok {
			return false, "", fault.Stalledf(v1alpha1.ReasonBuildFailed,
				"image %s: source %q is not resolved (no source engine in this operator)", img.Name, img.Source)
		}
	}
	baseDigest, err := s.resolveBase(ctx, img.Base, img.BaseInsecure)
	if err != nil {
		return false, "", buildError(img.Name, err)
	}
	src, err := s.sourceInputs(ctx, img, ref)
	if err != nil {
		return false, "", err
	}
	tags := plan.NewTagTemplates(img.Tags, c.Name, img.Name, img.Source, ref.ID)
	// From here on the run step is rendered for this build (its builder
	// pinned, builder_image.go): backends get it, and the inputs hash
	// covers it.
	img, reads, err := s.renderRun(img, tags)
	if err != nil {
		return false, "", err
	}
	s.pinRunImage(ctx, img)
	inputs := digest.JSON(struct {
		Component, Source, Base string
		Image                   *v1alpha1.ImageSpec
		Registry                *v1alpha1.RegistrySpec
		Reads                   map[string]string `json:",omitempty"`
	}{c.Name, src, baseDigest, img, s.env.Spec.Registry, reads})
	out, err := s.backendFor(img).build(ctx, &imageBuild{
		img: img, ist: ist, st: st, spec: imageSpec(img, ref, baseDigest),
		ref: ref, inputs: inputs, tags: tags,
	})
	if err != nil {
		return false, "", err
	}
	return out.waiting == "", out.waiting, nil
}

// recordBuilt writes a pushed build into the image's status.
func (s *imageBuilds) recordBuilt(img *v1alpha1.ImageSpec, ist *v1alpha1.ImageStatus, res *image.Result, inputs string, ref source.Ref, tags *plan.TagTemplates) {
	s.reportMovedTags(img.Name, ist.Digest, res)
	ist.Repository, ist.Digest, ist.ContentHash, ist.Tags = res.Repository, res.Digest, res.ContentHash, res.Tags
	ist.Inputs, ist.Revision = inputs, ref.Revision
	ist.RevisionTag = tags.Revision()
	ist.Debug = debugBuild(s.env, img)
	if res.Pushed && s.e.Events != nil {
		s.e.Events.Eventf(s.env, nil, corev1.EventTypeNormal, "ImagePushed", "Build",
			"pushed %s@%s (%d blobs uploaded) tagged %v", res.Repository, res.Digest, res.Uploaded, res.Tags)
	}
}

// stillPushed checks, at most once per verify interval, that the registry
// still holds an image built from unchanged inputs and its tags, so a wiped
// registry heals instead of leaving ImagePullBackOff behind.
func (s *imageBuilds) stillPushed(ctx context.Context, img *v1alpha1.ImageSpec, ist *v1alpha1.ImageStatus) (bool, error) {
	interval := s.e.Options.VerifyInterval
	if interval <= 0 {
		interval = 5 * time.Minute
	}
	key := memo.Key(s.env.UID, "verified/"+img.Name)
	if last, ok := s.e.recent.Get(key); ok && last.digest == ist.Digest && time.Since(last.at) < interval {
		return true, nil
	}
	b, err := s.registry(ctx)
	if err != nil {
		return false, err
	}
	held, err := s.tagsHeld(ctx, b, img, ist)
	if err != nil || !held {
		return false, err
	}
	if held, err := s.outputsHeld(ctx, img, ist); err != nil || !held {
		return false, err
	}
	s.e.recent.Put(key, memoEntry{digest: ist.Digest, at: time.Now()})
	s.next.RequeueWithin(interval)
	return true, nil
}

// tagsHeld reports whether the registry holds the image and its tags. In
// a repository shared on purpose a tag another environment (or tool)
// moved since is theirs now: it is held, not pushed back (tag_owner.go's
// rule), and only a tag missing is pushed again.
func (s *imageBuilds) tagsHeld(ctx context.Context, b *image.Builder, img *v1alpha1.ImageSpec, ist *v1alpha1.ImageStatus) (bool, error) {
	if !img.SharedRepository {
		return b.Holds(ctx, img.Name, ist.Digest, ist.Tags)
	}
	held, moved, err := b.Tagged(ctx, img.Name, ist.Digest, ist.Tags)
	if held && len(moved) > 0 {
		log.FromContext(ctx).V(1).Info("shared tags name another build; left there", "image", img.Name, "tags", slices.Sorted(maps.Keys(moved)))
	}
	return held, err
}

// reportedMissing checks, after the registry lost an image, that the
// platform image a builder reported is still there: false means it must
// be built again.
func (s *imageBuilds) reportedMissing(ctx context.Context, img *v1alpha1.ImageSpec, digest string) (bool, error) {
	b, err := s.registry(ctx)
	if err != nil {
		return false, err
	}
	held, err := b.Holds(ctx, img.Name, digest, nil)
	if err != nil {
		return false, buildError(img.Name, err)
	}
	return !held, nil
}

// imageSpec is the image to build, with its base pinned to the digest the
// inputs were computed from, so the build uses exactly that base. It
// carries the source's URL but not its revision: every push is a new
// revision, and an unchanged build must give the same digest so nothing
// rolls out. The revision is in status and the revision tag.
func imageSpec(img *v1alpha1.ImageSpec, ref source.Ref, baseDigest string) image.Spec {
	base := img.Base
	if base != "" && baseDigest != "" {
		base = pinDigest(base, baseDigest)
	}
	var live []string
	if img.LiveUpdate != nil {
		live = img.LiveUpdate.Paths
	}
	return image.Spec{
		LivePaths: live,
		Name:      img.Name, Base: base, BaseInsecure: img.BaseInsecure, Platforms: img.Platforms, Layers: img.Layers,
		Entrypoint: img.Entrypoint, Cmd: img.Cmd, Env: img.Env,
		WorkingDir: img.WorkingDir, User: img.User,
		SourceURL: ref.URL,
	}
}

// registry is the environment's registry client, made once per reconcile
// with the credentials of spec.registry.credentialsRef.
func (s *imageBuilds) registry(ctx context.Context) (*image.Builder, error) {
	if s.builder != nil {
		return s.builder, nil
	}
	reg := s.env.Spec.Registry
	if reg == nil {
		return nil, fault.Stalled(v1alpha1.ReasonInvalidSpec, errors.New("spec.registry: images need a registry to push to"))
	}
	var keychain authn.Keychain
	if reg.CredentialsRef != nil {
		tenant, err := s.tenant.Client()
		if err != nil {
			return nil, err
		}
		data, err := readDockerConfigSecret(ctx, tenant, s.env.Namespace, reg.CredentialsRef.Name)
		if err != nil {
			return nil, err
		}
		if keychain, err = image.KeychainFromDockerConfig(data); err != nil {
			return nil, fault.Stalledf(v1alpha1.ReasonInvalidSpec, "spec.registry.credentialsRef: Secret %s: %w", reg.CredentialsRef.Name, err)
		}
	}
	var opts []image.Option
	if s.e.Options.BaseCacheDir != "" {
		opts = append(opts, image.WithCacheDir(s.e.Options.BaseCacheDir))
	}
	if s.e.Options.Transport != nil {
		opts = append(opts, image.WithTransport(s.e.Options.Transport))
	}
	if s.e.Options.Supervisor != "" {
		opts = append(opts, image.WithSupervisor(s.e.Options.Supervisor))
	}
	b, err := image.NewBuilder(image.Registry{Prefix: reg.Prefix, PullPrefix: reg.PullPrefix, Insecure: reg.Insecure, Keychain: keychain,
		Compression: s.e.Options.Compression}, opts...)
	if err != nil {
		return nil, fault.Stalledf(v1alpha1.ReasonInvalidSpec, "spec.registry: %w", err)
	}
	s.builder = b
	return b, nil
}

// readDockerConfigSecret reads a kubernetes.io/dockerconfigjson Secret's document,
// as the environment's ServiceAccount.
func readDockerConfigSecret(ctx context.Context, tenant client.Reader, namespace, name string) ([]byte, error) {
	secret := &corev1.Secret{}
	if err := tenant.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, secret); err != nil {
		return nil, fault.Stalledf(v1alpha1.ReasonInvalidSpec, "spec.registry.credentialsRef: reading Secret %s: %w", name, err)
	}
	data, ok := secret.Data[corev1.DockerConfigJsonKey]
	if secret.Type != corev1.SecretTypeDockerConfigJson || !ok {
		return nil, fault.Stalledf(v1alpha1.ReasonInvalidSpec,
			"spec.registry.credentialsRef: Secret %s is of type %q; want %s with key %s", name, secret.Type, corev1.SecretTypeDockerConfigJson, corev1.DockerConfigJsonKey)
	}
	return data, nil
}

// resolveBase returns the digest a base reference names, asking the
// registry at most once per interval (or per reconcile request).
func (s *imageBuilds) resolveBase(ctx context.Context, base string, insecure bool) (string, error) {
	if base == "" {
		return "", nil
	}
	if d := digestOf(base); d != "" {
		return d, nil
	}
	interval := s.e.Options.BaseInterval
	if interval <= 0 {
		interval = time.Minute
	}
	key := memo.Key(s.env.UID, "base/"+base)
	request := s.env.Annotations[v1alpha1.ReconcileRequestAnnotation]
	if last, ok := s.e.recent.Get(key); ok && last.request == request && time.Since(last.at) < interval {
		s.next.RequeueWithin(time.Until(last.at.Add(interval)))
		return last.digest, nil
	}
	b, err := s.registry(ctx)
	if err != nil {
		return "", err
	}
	d, err := b.ResolveBase(ctx, base, insecure)
	if err != nil {
		return "", err
	}
	s.e.recent.Put(key, memoEntry{request: request, digest: d, at: time.Now()})
	s.next.RequeueWithin(interval)
	return d, nil
}

// digestOf returns the digest of a reference pinned by digest, else "".
func digestOf(ref string) string {
	if d, err := name.NewDigest(ref); err == nil {
		return d.DigestStr()
	}
	return ""
}

// pinDigest names the same repository as ref, by digest: "busybox:1.36"
// becomes "index.docker.io/library/busybox@sha256:...".
func pinDigest(ref, digest string) string {
	r, err := name.ParseReference(ref)
	if err != nil {
		// ResolveBase already parsed it; keep the reference as written.
		return ref
	}
	return r.Context().Digest(digest).Name()
}

// imageStatus returns the status entry of an image, adding it when
// missing.
func imageStatus(st *v1alpha1.ComponentStatus, name string) *v1alpha1.ImageStatus {
	if ist := st.Image(name); ist != nil {
		return ist
	}
	st.Images = append(st.Images, v1alpha1.ImageStatus{Name: name})
	return &st.Images[len(st.Images)-1]
}

// pruneImageStatus drops images no longer in the component's spec.
func pruneImageStatus(st *v1alpha1.ComponentStatus, c *v1alpha1.Component) {
	kept := st.Images[:0]
	for _, is := range st.Images {
		for _, img := range c.Images {
			if img.Name == is.Name {
				kept = append(kept, is)
				break
			}
		}
	}
	st.Images = kept
}

// buildError maps a build failure to what the environment shows: a
// permanent one stalls it naming the image, a registry being down leaves it
// Waiting with backoff, anything else is retried.
func buildError(image string, err error) error {
	if fault.AsStalled(err) != nil {
		return err
	}
	return fault.StallPermanent(v1alpha1.ReasonBuildFailed, fmt.Errorf("image %s: %w", image, err))
}

// memoEntry is a base digest resolved, or a push verified, and when.
type memoEntry struct {
	request, digest string
	at              time.Time
}

// reportMovedTags emits a Warning for each tag the push moved away from a
// digest this environment had not pushed (previous is the digest it
// recorded last): two environments pushing to one repository move each
// other's tags, and a pod started from such a tag would run the other's
// build.
func (s *imageBuilds) reportMovedTags(image, previous string, res *image.Result) {
	if s.e.Events == nil {
		return
	}
	for _, tag := range slices.Sorted(maps.Keys(res.MovedFrom)) {
		if from := res.MovedFrom[tag]; from != previous {
			by := "another environment or tool"
			if owner := s.tagOwners[from]; owner != "" {
				by = "environment " + owner
			}
			s.e.Events.Eventf(s.env, nil, corev1.EventTypeWarning, v1alpha1.ReasonTagMoved, "Build",
				"image %s: tag %s named %s, which this environment did not push, and now names %s: %s pushes to %s too",
				image, tag, from, res.Digest, by, res.Repository)
		}
	}
}

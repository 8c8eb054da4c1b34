package controllers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/internal/plan"
	"github.com/devloop-dev/devloop/internal/source"
)

// ImageOptions configures how the operator builds images.
type ImageOptions struct {
	// HelperImage is the operator's own image, run by builder pods for
	// fetching sources and pushing images. Images with a run step need it.
	HelperImage string
	// BaseCacheDir caches base image layers on disk; empty disables it.
	BaseCacheDir string
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
	// zero value is auto (see build.Registry).
	Compression source.Compression
}

// buildImages brings every image of a component to its inputs: unchanged
// inputs do nothing, images without a run step are built in-process, images
// with one by builder Jobs. It returns a message and false while a builder
// Job runs.
func (r *DevEnvironmentReconciler) buildImages(ctx context.Context, s *scope, c *v1alpha1.Component, st *v1alpha1.ComponentStatus) (bool, string, error) {
	done := true
	var message string
	for i := range c.Images {
		img := &c.Images[i]
		ist := imageStatus(st, img.Name)
		ok, msg, err := r.buildImage(ctx, s, c, img, ist)
		if err != nil {
			return false, "", err
		}
		if !ok {
			done, message = false, msg
		}
	}
	pruneImageStatus(st, c)
	return done, message, nil
}

// buildImage builds one image if its inputs changed since its digest was
// pushed.
func (r *DevEnvironmentReconciler) buildImage(ctx context.Context, s *scope, c *v1alpha1.Component, img *v1alpha1.ImageSpec, ist *v1alpha1.ImageStatus) (bool, string, error) {
	var ref source.Ref
	if img.Source != "" {
		var ok bool
		if ref, ok = s.refs[img.Source]; !ok {
			return false, "", &StallingError{Reason: v1alpha1.ReasonBuildFailed,
				Err: fmt.Errorf("image %s: source %q is not resolved (no source engine in this operator)", img.Name, img.Source)}
		}
	}
	// The registry client (and its credentials Secret) is made only when
	// the registry must be asked: a no-op reconcile does neither.
	baseDigest, err := r.resolveBase(ctx, s, img.Base)
	if err != nil {
		return false, "", buildError(img.Name, err)
	}
	src, err := r.sourceInputs(ctx, s, img, ref)
	if err != nil {
		return false, "", err
	}
	inputs := hashJSON(struct {
		Component, Source, Base string
		Image                   *v1alpha1.ImageSpec
		Registry                *v1alpha1.RegistrySpec
	}{c.Name, src, baseDigest, img, s.env.Spec.Registry})
	if ist.Inputs == inputs && ist.Digest != "" {
		held, err := r.stillPushed(ctx, s, img, ist)
		if err != nil {
			return false, "", buildError(img.Name, err)
		}
		if held {
			return true, "", nil
		}
		// The registry lost the image (wiped, garbage-collected): build
		// and push it again, builder Jobs included.
		log.FromContext(ctx).Info("image missing from the registry; pushing it again", "image", img.Name, "digest", ist.Digest)
		if img.Run != nil {
			tenant, err := r.tenant(s)
			if err != nil {
				return false, "", err
			}
			if err := tenant.DeleteAllOf(ctx, &batchv1.Job{}, client.InNamespace(s.env.Namespace),
				client.MatchingLabels{LabelEnvironment: s.env.Name, LabelImage: img.Name, LabelRole: "build"},
				client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
				return false, "", tenantError(err, "delete builder jobs of image "+img.Name)
			}
			return false, "image " + img.Name + " is missing from the registry: building it again", nil
		}
	}

	spec := buildSpec(img, ref, baseDigest)
	render := tagRenderer(img, c, ref)
	var res *build.Result
	if img.Run == nil {
		dir := ""
		if img.Source != "" {
			a, err := r.artifact(ctx, s, img.Source)
			if err != nil {
				return false, "", err
			}
			dir = a.Dir
			spec.Prebuilt = a.Prebuilt
			if a.Kind == source.KindOCI {
				spec.SourceRepository = a.URL
			}
		}
		b, err := r.builder(ctx, s)
		if err != nil {
			return false, "", err
		}
		log.FromContext(ctx).Info("building image in-process", "image", img.Name, "revision", ref.Revision)
		if res, err = b.Build(ctx, spec, dir, render); err != nil {
			return false, "", buildError(img.Name, err)
		}
	} else {
		var msg string
		if img.Run.KeepWarm {
			res, msg, err = r.buildWarm(ctx, s, img, ist, spec, ref, inputs, render)
		} else {
			res, msg, err = r.buildWithJobs(ctx, s, img, ist, spec, ref, inputs, render)
		}
		if err != nil || res == nil {
			return false, msg, err
		}
	}
	ist.Repository, ist.Digest, ist.ContentHash, ist.Tags = res.Repository, res.Digest, res.ContentHash, res.Tags
	ist.Inputs, ist.Revision = inputs, ref.Revision
	ist.RevisionTag = ""
	if img.Source != "" {
		ist.RevisionTag = renderRevisionTag(c, img, ref, res.ContentHash)
	}
	if res.Pushed && r.Recorder != nil {
		r.Recorder.Eventf(s.env, nil, corev1.EventTypeNormal, "ImagePushed", "Build",
			"pushed %s@%s (%d blobs uploaded) tagged %v", res.Repository, res.Digest, res.Uploaded, res.Tags)
	}
	return true, "", nil
}

// sourceInputs is what of the image's source its inputs hash covers: the
// resolved revision, or, for an image that names paths, the content of
// just those paths, so a change elsewhere in the source does not rebuild
// it. Such an image keeps the revision (and revision tag) it was built
// from until its own paths change.
func (r *DevEnvironmentReconciler) sourceInputs(ctx context.Context, s *scope, img *v1alpha1.ImageSpec, ref source.Ref) (string, error) {
	if img.Source == "" || len(img.Paths) == 0 {
		return ref.Key(), nil
	}
	a, err := r.artifact(ctx, s, img.Source)
	if err != nil {
		return "", err
	}
	parts := make([]string, 0, len(img.Paths))
	for i, p := range img.Paths {
		d, err := source.PathDigest(a.Dir, p)
		if err != nil {
			return "", &StallingError{Reason: v1alpha1.ReasonBuildFailed,
				Err: fmt.Errorf("image %s: paths[%d]: %w (source %s at %s)", img.Name, i, err, img.Source, ref.Revision)}
		}
		parts = append(parts, p+"="+d)
	}
	return strings.Join(parts, ","), nil
}

// stillPushed checks, at most once per verify interval, that the registry
// still holds an image built from unchanged inputs and its tags, so a wiped
// registry heals instead of leaving ImagePullBackOff behind.
func (r *DevEnvironmentReconciler) stillPushed(ctx context.Context, s *scope, img *v1alpha1.ImageSpec, ist *v1alpha1.ImageStatus) (bool, error) {
	interval := r.Images.VerifyInterval
	if interval <= 0 {
		interval = 5 * time.Minute
	}
	key := string(s.env.UID) + "/verified/" + img.Name
	if last, ok := r.resolved.get(key); ok && last.ref.Digest == ist.Digest && time.Since(last.at) < interval {
		return true, nil
	}
	b, err := r.builder(ctx, s)
	if err != nil {
		return false, err
	}
	held, err := b.Holds(ctx, img.Name, ist.Digest, ist.Tags)
	if err != nil || !held {
		return false, err
	}
	r.resolved.put(key, resolution{ref: source.Ref{Digest: ist.Digest}, at: time.Now()})
	s.requeueWithin(interval)
	return true, nil
}

// buildSpec is the image to build, with its base pinned to the digest the
// inputs were computed from, so the build uses exactly that base.
func buildSpec(img *v1alpha1.ImageSpec, ref source.Ref, baseDigest string) build.Image {
	base := img.Base
	if base != "" && baseDigest != "" {
		base = pinDigest(base, baseDigest)
	}
	return build.Image{
		Name: img.Name, Base: base, Platforms: img.Platforms, Layers: img.Layers,
		Entrypoint: img.Entrypoint, Cmd: img.Cmd, Env: img.Env,
		WorkingDir: img.WorkingDir, User: img.User,
		SourceURL: ref.URL, Revision: ref.ID,
	}
}

// tagRenderer renders the spec's tag templates once the content hash is
// known.
func tagRenderer(img *v1alpha1.ImageSpec, c *v1alpha1.Component, ref source.Ref) func(string) ([]string, error) {
	return func(contentHash string) ([]string, error) {
		v := tagValues(img, c, ref, contentHash)
		var tags []string
		for i, t := range img.Tags {
			tag, err := plan.RenderTag(t, v)
			if err != nil {
				return nil, fault.Permanentf("tags[%d]: %w", i, err)
			}
			tags = append(tags, tag)
		}
		return tags, nil
	}
}

// tagValues are the variables of an image's tag templates.
func tagValues(img *v1alpha1.ImageSpec, c *v1alpha1.Component, ref source.Ref, contentHash string) plan.TagValues {
	v := plan.TagValues{ContentHash: contentHash, Revision: ref.ID, Source: img.Source, Image: img.Name, Component: c.Name}
	v.ShortRevision = ref.ID
	if len(v.ShortRevision) > 12 {
		v.ShortRevision = v.ShortRevision[:12]
	}
	return v
}

// builder is the environment's registry client, made once per reconcile
// with the credentials of spec.registry.credentialsRef.
func (r *DevEnvironmentReconciler) builder(ctx context.Context, s *scope) (*build.Builder, error) {
	if s.builder != nil {
		return s.builder, nil
	}
	reg := s.env.Spec.Registry
	if reg == nil {
		return nil, &StallingError{Reason: v1alpha1.ReasonInvalidSpec, Err: errors.New("spec.registry: images need a registry to push to")}
	}
	var keychain authn.Keychain
	if reg.CredentialsRef != nil {
		tenant, err := r.tenant(s)
		if err != nil {
			return nil, err
		}
		data, err := dockerConfig(ctx, tenant, s.env.Namespace, reg.CredentialsRef.Name)
		if err != nil {
			return nil, err
		}
		if keychain, err = build.KeychainFromDockerConfig(data); err != nil {
			return nil, &StallingError{Reason: v1alpha1.ReasonInvalidSpec,
				Err: fmt.Errorf("spec.registry.credentialsRef: Secret %s: %w", reg.CredentialsRef.Name, err)}
		}
	}
	var opts []build.Option
	if r.Images.BaseCacheDir != "" {
		opts = append(opts, build.WithCacheDir(r.Images.BaseCacheDir))
	}
	if r.Images.Transport != nil {
		opts = append(opts, build.WithTransport(r.Images.Transport))
	}
	b, err := build.NewBuilder(build.Registry{Prefix: reg.Prefix, PullPrefix: reg.PullPrefix, Insecure: reg.Insecure, Keychain: keychain,
		Compression: r.Images.Compression}, opts...)
	if err != nil {
		return nil, &StallingError{Reason: v1alpha1.ReasonInvalidSpec, Err: fmt.Errorf("spec.registry: %w", err)}
	}
	s.builder = b
	return b, nil
}

// dockerConfig reads a kubernetes.io/dockerconfigjson Secret's document,
// as the environment's ServiceAccount.
func dockerConfig(ctx context.Context, tenant client.Reader, namespace, name string) ([]byte, error) {
	secret := &corev1.Secret{}
	if err := tenant.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, secret); err != nil {
		return nil, &StallingError{Reason: v1alpha1.ReasonInvalidSpec,
			Err: fmt.Errorf("spec.registry.credentialsRef: reading Secret %s: %w", name, err)}
	}
	data, ok := secret.Data[corev1.DockerConfigJsonKey]
	if secret.Type != corev1.SecretTypeDockerConfigJson || !ok {
		return nil, &StallingError{Reason: v1alpha1.ReasonInvalidSpec,
			Err: fmt.Errorf("spec.registry.credentialsRef: Secret %s is of type %q; want %s with key %s", name, secret.Type, corev1.SecretTypeDockerConfigJson, corev1.DockerConfigJsonKey)}
	}
	return data, nil
}

// resolveBase returns the digest a base reference names, asking the
// registry at most once per interval (or per reconcile request).
func (r *DevEnvironmentReconciler) resolveBase(ctx context.Context, s *scope, base string) (string, error) {
	if base == "" {
		return "", nil
	}
	if d := digestOf(base); d != "" {
		return d, nil
	}
	interval := r.Images.BaseInterval
	if interval <= 0 {
		interval = time.Minute
	}
	key := string(s.env.UID) + "/base/" + base
	request := s.env.Annotations[v1alpha1.ReconcileRequestAnnotation]
	if last, ok := r.resolved.get(key); ok && last.request == request && time.Since(last.at) < interval {
		s.requeueWithin(time.Until(last.at.Add(interval)))
		return last.ref.Digest, nil
	}
	b, err := r.builder(ctx, s)
	if err != nil {
		return "", err
	}
	d, err := b.ResolveBase(ctx, base)
	if err != nil {
		return "", err
	}
	r.resolved.put(key, resolution{request: request, ref: source.Ref{Digest: d}, at: time.Now()})
	s.requeueWithin(interval)
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
	for i := range st.Images {
		if st.Images[i].Name == name {
			return &st.Images[i]
		}
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
	var stalling *StallingError
	if errors.As(err, &stalling) {
		return err
	}
	err = fmt.Errorf("image %s: %w", image, err)
	if fault.IsPermanent(err) {
		return &StallingError{Reason: v1alpha1.ReasonBuildFailed, Err: err}
	}
	return err
}

// sourceError maps a source failure like buildError does.
func sourceError(name string, err error) error {
	if fault.IsPermanent(err) {
		return &StallingError{Reason: v1alpha1.ReasonSourceFailed, Err: err}
	}
	return err
}

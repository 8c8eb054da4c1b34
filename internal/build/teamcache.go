package build

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/internal/pods"
	"github.com/devloop-dev/devloop/internal/teamcache"
)

// TeamCacheOptions turn on the team build cache (internal/teamcache) for
// builder pods: the go command in them reads and writes its build cache
// through `helper gocacheprog`, which asks the operator's cache service.
type TeamCacheOptions struct {
	// URL is the service as builder pods reach it (https://HOST:PORT).
	URL string
	// Audience of the projected token builder pods present.
	Audience string
	// CA is the PEM bundle builder pods check the service's certificate
	// against.
	CA []byte
	// Reviewer checks spec.cache.readFrom (SubjectAccessReview).
	Reviewer teamcache.Reviewer
}

// PodTeamCache is what a builder pod needs to reach the team cache
// (test pods on the builders' claim reach it the same way).
type PodTeamCache = pods.TeamCache

// Service is the team cache as pods reach it (nil when off), its audience
// defaulted.
func (o *TeamCacheOptions) Service() *pods.TeamCacheService {
	if o == nil || o.URL == "" {
		return nil
	}
	audience := o.Audience
	if audience == "" {
		audience = teamcache.DefaultAudience
	}
	return &pods.TeamCacheService{URL: o.URL, Audience: audience, CA: string(o.CA)}
}

// teamCache is the team cache of this environment's builder pods, nil
// when the operator runs none or the environment acts as the operator
// itself (it has no ServiceAccount to run a pod as). An entry of
// spec.cache.readFrom whose cache the ServiceAccount may not read (the
// verb teamcache.VerbReadCache, not get) stalls the build, naming the
// entry.
func (s *imageBuilds) teamCache(ctx context.Context) (*PodTeamCache, error) {
	o := s.e.Options.TeamCache
	sa := s.tenant.ServiceAccount()
	if o == nil || o.URL == "" || sa == "" {
		// Naming caches to read that no build could read says so, rather
		// than building cold without a word.
		if len(s.env.CacheReadFrom()) == 0 {
			return nil, nil
		}
		if sa == "" {
			return nil, fault.Stalledf(v1alpha1.ReasonInvalidSpec, "spec.cache.readFrom: an environment acting as the operator reads no other environment's build cache (set spec.serviceAccountName)")
		}
		return nil, fault.Stalledf(v1alpha1.ReasonInvalidSpec, "spec.cache.readFrom: the operator runs no build cache (its --build-cache-bind-address, chart value buildCache.enabled)")
	}
	if _, err := teamcache.CheckReadFrom(ctx, o.Reviewer, s.env, sa); err != nil {
		var refused *teamcache.ReadRefusedError
		if errors.As(err, &refused) {
			return nil, fault.Stalled(v1alpha1.ReasonForbidden, err)
		}
		return nil, err
	}
	return o.Service().For(sa), nil
}

// teamCacheEnv points the go command at `helper gocacheprog`, whose local
// cache is on the first cache path (the cache claim when there is one).
func teamCacheEnv(req JobRequest) []corev1.EnvVar {
	return pods.GoCacheProgEnv(req.Run.Cache.PathsOrDefault(), req.TeamCache)
}

// withTeamCache runs a builder pod as the environment's ServiceAccount
// with a token for the cache's audience only (no API token is mounted)
// in the build container.
func withTeamCache(req JobRequest, spec *corev1.PodSpec, build *corev1.Container) {
	pods.WithTeamCacheToken(spec, build, req.TeamCache)
}

// installTools is a builder Job's init container copying the helper
// binary into the tools volume, for GOCACHEPROG (a warm builder has it
// already).
func installTools(req JobRequest) (corev1.Container, corev1.Volume, corev1.VolumeMount) {
	return pods.InstallTools(req.HelperImage)
}

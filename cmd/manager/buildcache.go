package main

import (
	"errors"
	"flag"
	"path/filepath"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/internal/reviewguard"
	"github.com/devloop-dev/devloop/internal/teamcache"
)

// buildCacheOptions configure the team build cache (internal/teamcache);
// an empty listen address turns it off.
type buildCacheOptions struct {
	listen, url, audience string
	maxBytes              int64
}

func registerBuildCacheFlags(fs *flag.FlagSet, o *buildCacheOptions) {
	fs.StringVar(&o.listen, "build-cache-bind-address", "", "address the team Go build cache service binds to (builder pods' GOCACHEPROG asks it); empty: off")
	fs.StringVar(&o.url, "build-cache-url", "", "the build cache service as builder pods reach it, e.g. http://devloop-build-cache.devloop-system.svc:5003")
	fs.StringVar(&o.audience, "build-cache-audience", teamcache.DefaultAudience, "audience of the projected ServiceAccount token builder pods present to the build cache")
	fs.Int64Var(&o.maxBytes, "build-cache-max-bytes", 10<<30, "bound of the build cache store under --work-dir, in bytes: least recently used entries are removed to stay within it")
}

// options are the engine's side of the build cache, nil when off: a
// shard's instance tells its builder pods of the main instance's service
// (--build-cache-url) without serving one.
func (o buildCacheOptions) options(cs kubernetes.Interface) (*build.TeamCacheOptions, error) {
	if o.listen != "" && o.url == "" {
		return nil, errors.New("--build-cache-bind-address needs --build-cache-url")
	}
	if o.url == "" {
		return nil, nil
	}
	return &build.TeamCacheOptions{URL: o.url, Audience: o.audience, Reviewer: teamcache.NewKubeReviewer(cs)}, nil
}

// addBuildCacheService serves the store under workDir on the leader.
func addBuildCacheService(mgr ctrl.Manager, cfg *rest.Config, o buildCacheOptions, workDir, defaultSA string) error {
	if o.listen == "" {
		return nil
	}
	// Its own connection, bounded: callers' tokens are reviewed at most
	// reviewguard.ReviewQPS a second, whatever they send.
	cs, err := kubernetes.NewForConfig(reviewguard.ReviewConfig(cfg))
	if err != nil {
		return err
	}
	return mgr.Add(teamcache.Listener{Addr: o.listen, Server: &teamcache.Server{
		Store:    &teamcache.Store{Root: filepath.Join(workDir, "build-cache"), MaxBytes: o.maxBytes},
		Reviewer: teamcache.NewKubeReviewer(cs), Reader: mgr.GetAPIReader(),
		Audience: o.audience, DefaultServiceAccount: defaultSA,
		Log: ctrl.Log.WithName("build-cache"),
	}})
}

func kubeClientset(cfg *rest.Config) (kubernetes.Interface, error) {
	return kubernetes.NewForConfig(cfg)
}

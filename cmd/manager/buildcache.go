package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/internal/httpserve"
	"github.com/devloop-dev/devloop/internal/reviewguard"
	"github.com/devloop-dev/devloop/internal/teamcache"
)

// buildCacheOptions configure the team build cache (internal/teamcache);
// an empty listen address turns it off.
type buildCacheOptions struct {
	listen, url, audience string
	// service is NAMESPACE/NAME of the selectorless Service the leader
	// points at its own pod (teamcache.LeaderEndpoint); empty: none.
	service  string
	maxBytes int64
	// namespaceMaxBytes is one namespace's share of maxBytes (0: half).
	namespaceMaxBytes int64
	// The service's certificate and key, and the CA builder pods trust;
	// none: a certificate made at start for --build-cache-url's host
	// (one instance serving and building: no shards).
	tlsCert, tlsKey, caFile string
	// serving and ca are what prepare made of them.
	serving *tls.Config
	ca      []byte
}

func registerBuildCacheFlags(fs *flag.FlagSet, o *buildCacheOptions) {
	fs.StringVar(&o.listen, "build-cache-bind-address", "", "address the team Go build cache service binds to (builder pods' GOCACHEPROG asks it); empty: off")
	fs.StringVar(&o.url, "build-cache-url", "", "the build cache service as builder pods reach it, e.g. https://devloop-build-cache.devloop-system.svc:5003")
	fs.StringVar(&o.service, "build-cache-service", "", "NAMESPACE/NAME of the selectorless Service builder pods reach the build cache by: the leader points it at its own pod (POD_IP), so no builder reaches a standby; empty: the Service is not managed")
	fs.StringVar(&o.audience, "build-cache-audience", teamcache.DefaultAudience, "audience of the projected ServiceAccount token builder pods present to the build cache")
	fs.StringVar(&o.tlsCert, "build-cache-tls-cert", "", "PEM serving certificate of the build cache (TLS only); empty: one made at start")
	fs.StringVar(&o.tlsKey, "build-cache-tls-key", "", "PEM key of --build-cache-tls-cert")
	fs.StringVar(&o.caFile, "build-cache-ca-file", "", "PEM bundle builder pods check the build cache's certificate against")
	fs.Int64Var(&o.maxBytes, "build-cache-max-bytes", 10<<30, "bound of the build cache store under --work-dir, in bytes: least recently used entries are removed to stay within it")
	fs.Int64Var(&o.namespaceMaxBytes, "build-cache-namespace-max-bytes", 0, "what the environments of one namespace may hold of the build cache store together, in bytes; a write past it evicts that namespace's own entries; 0 is half of --build-cache-max-bytes")
}

// options are the engine's side of the build cache, nil when off: a
// shard's instance tells its builder pods of the main instance's service
// (--build-cache-url) without serving one.
func (o *buildCacheOptions) options(cs kubernetes.Interface) (*build.TeamCacheOptions, error) {
	if o.listen != "" && o.url == "" {
		return nil, errors.New("--build-cache-bind-address needs --build-cache-url")
	}
	if o.namespaceMaxBytes < 0 || (o.maxBytes > 0 && o.namespaceMaxBytes > o.maxBytes) {
		return nil, fmt.Errorf("--build-cache-namespace-max-bytes must be between 0 and --build-cache-max-bytes (%d), got %d", o.maxBytes, o.namespaceMaxBytes)
	}
	if o.url == "" {
		return nil, nil
	}
	if err := o.prepareTLS(); err != nil {
		return nil, err
	}
	return &build.TeamCacheOptions{URL: o.url, Audience: o.audience, CA: o.ca, Reviewer: teamcache.NewKubeReviewer(cs)}, nil
}

// prepareTLS loads the service's certificate and the CA, or makes a
// certificate for the URL's host that is its own CA.
func (o *buildCacheOptions) prepareTLS() error {
	u, err := url.Parse(o.url)
	if err != nil || u.Scheme != "https" || u.Hostname() == "" {
		return fmt.Errorf("--build-cache-url %q: want https://HOST:PORT (the service answers TLS only)", o.url)
	}
	if o.caFile != "" {
		if o.ca, err = os.ReadFile(o.caFile); err != nil {
			return err
		}
	}
	if o.listen == "" {
		if o.ca == nil {
			return errors.New("--build-cache-url without --build-cache-bind-address needs --build-cache-ca-file")
		}
		return nil
	}
	if o.tlsCert != "" || o.tlsKey != "" {
		if o.ca == nil {
			return errors.New("--build-cache-tls-cert needs --build-cache-ca-file")
		}
		o.serving, err = httpserve.TLSFiles(o.tlsCert, o.tlsKey)
		return err
	}
	o.serving, o.ca, err = httpserve.SelfSigned(u.Hostname())
	return err
}

// addBuildCacheService serves the store under workDir on the leader.
func addBuildCacheService(mgr ctrl.Manager, cfg *rest.Config, o *buildCacheOptions, workDir, defaultSA string) error {
	if o.listen == "" {
		return nil
	}
	// Its own connection, bounded: callers' tokens are reviewed at most
	// reviewguard.ReviewQPS a second, whatever they send.
	cs, err := kubernetes.NewForConfig(reviewguard.ReviewConfig(cfg))
	if err != nil {
		return err
	}
	err = mgr.Add(teamcache.Listener{Addr: o.listen, TLS: o.serving, Server: &teamcache.Server{
		Store:    o.store(workDir),
		Reviewer: teamcache.NewKubeReviewer(cs), Reader: mgr.GetAPIReader(),
		Audience: o.audience, DefaultServiceAccount: defaultSA,
		Log: ctrl.Log.WithName("build-cache"),
	}})
	if err != nil || o.service == "" {
		return err
	}
	endpoint, err := o.leaderEndpoint(cfg)
	if err != nil {
		return err
	}
	return mgr.Add(endpoint)
}

// leaderEndpoint points --build-cache-service at this pod while it leads.
func (o *buildCacheOptions) leaderEndpoint(cfg *rest.Config) (teamcache.LeaderEndpoint, error) {
	ns, name, ok := strings.Cut(o.service, "/")
	if !ok || ns == "" || name == "" {
		return teamcache.LeaderEndpoint{}, fmt.Errorf("--build-cache-service %q: want NAMESPACE/NAME", o.service)
	}
	_, p, err := net.SplitHostPort(o.listen)
	if err != nil {
		return teamcache.LeaderEndpoint{}, fmt.Errorf("--build-cache-bind-address %q: %w", o.listen, err)
	}
	port, err := strconv.ParseInt(p, 10, 32)
	if err != nil || port <= 0 {
		return teamcache.LeaderEndpoint{}, fmt.Errorf("--build-cache-bind-address %q: a port, to point --build-cache-service at", o.listen)
	}
	podIP := os.Getenv("POD_IP")
	if podIP == "" {
		return teamcache.LeaderEndpoint{}, errors.New("--build-cache-service needs this pod's address in POD_IP (the downward API's status.podIP)")
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return teamcache.LeaderEndpoint{}, err
	}
	return teamcache.LeaderEndpoint{Client: cs, Service: types.NamespacedName{Namespace: ns, Name: name},
		PodIP: podIP, Port: int32(port)}, nil
}

// store is the build cache's store under workDir, with its bounds.
func (o *buildCacheOptions) store(workDir string) *teamcache.Store {
	return &teamcache.Store{Root: filepath.Join(workDir, "build-cache"), MaxBytes: o.maxBytes, NamespaceMaxBytes: o.namespaceMaxBytes}
}

func kubeClientset(cfg *rest.Config) (kubernetes.Interface, error) {
	return kubernetes.NewForConfig(cfg)
}

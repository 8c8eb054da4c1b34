package deploy

import (
	"fmt"
	"sync"

	"helm.sh/helm/v3/pkg/action"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ConfigFactory returns a Helm action configuration whose releases are
// stored in, and whose namespaced objects default to, namespace. It is the
// seam tests use to swap the storage driver or the identity.
type ConfigFactory func(namespace string) (*action.Configuration, error)

// HelmDriver is the storage driver of every release devloop writes: Secrets
// in the release namespace, Helm's default, so `helm list` sees them.
const HelmDriver = "secret"

// NewConfigFactory builds configurations that talk to the cluster cfg
// points at. When impersonate is not empty every request, release storage
// included, is made as that user (see identity.ServiceAccountUser), so a release can
// do no more than the ServiceAccount may.
func NewConfigFactory(cfg *rest.Config, impersonate string) ConfigFactory {
	return func(namespace string) (*action.Configuration, error) {
		c := rest.CopyConfig(cfg)
		if impersonate != "" {
			c.Impersonate = rest.ImpersonationConfig{UserName: impersonate}
		}
		getter := &restGetter{cfg: c, namespace: namespace}
		ac := new(action.Configuration)
		// Helm's debug log goes nowhere: the release outcome is reported
		// through Outcome and errors, and Helm's log lines may quote values.
		if err := ac.Init(getter, namespace, HelmDriver, func(string, ...any) {}); err != nil {
			return nil, fmt.Errorf("helm configuration for namespace %s: %w", namespace, err)
		}
		return ac, nil
	}
}

// restGetter is a genericclioptions.RESTClientGetter over an in-memory
// rest.Config, without kubeconfig files or environment variables. The
// discovery client and REST mapper are built once so Helm can invalidate
// and reset them after it installs CRDs.
type restGetter struct {
	cfg       *rest.Config
	namespace string

	once      sync.Once
	discovery discovery.CachedDiscoveryInterface
	mapper    meta.ResettableRESTMapper
	err       error
}

func (g *restGetter) ToRESTConfig() (*rest.Config, error) { return rest.CopyConfig(g.cfg), nil }

func (g *restGetter) init() {
	g.once.Do(func() {
		c := rest.CopyConfig(g.cfg)
		// Discovery of a cluster with many CRDs makes many requests at once.
		c.QPS, c.Burst = 50, 100
		dc, err := discovery.NewDiscoveryClientForConfig(c)
		if err != nil {
			g.err = err
			return
		}
		g.discovery = memory.NewMemCacheClient(dc)
		g.mapper = restmapper.NewDeferredDiscoveryRESTMapper(g.discovery)
	})
}

func (g *restGetter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	g.init()
	return g.discovery, g.err
}

func (g *restGetter) ToRESTMapper() (meta.RESTMapper, error) {
	g.init()
	if g.err != nil {
		return nil, g.err
	}
	return restmapper.NewShortcutExpander(g.mapper, g.discovery, func(string) {}), nil
}

// ToRawKubeConfigLoader only serves the namespace: Helm's kube client reads
// its default namespace from it.
func (g *restGetter) ToRawKubeConfigLoader() clientcmd.ClientConfig {
	return clientcmd.NewDefaultClientConfig(*clientcmdapi.NewConfig(),
		&clientcmd.ConfigOverrides{Context: clientcmdapi.Context{Namespace: g.namespace}})
}

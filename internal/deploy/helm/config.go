package helm

import (
	"fmt"

	"helm.sh/helm/v3/pkg/action"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
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

// ConfigFactory builds configurations that talk to the cluster cfg
// points at, sharing r's discovery of their identity. When impersonate is not empty every request, release storage
// included, is made as that user (see identity.ServiceAccountUser), so a release can
// do no more than the ServiceAccount may.
func (r *Releases) ConfigFactory(cfg *rest.Config, impersonate string) ConfigFactory {
	return func(namespace string) (*action.Configuration, error) {
		c := rest.CopyConfig(cfg)
		if impersonate != "" {
			c.Impersonate = rest.ImpersonationConfig{UserName: impersonate}
		}
		d, err := r.discoveryFor(c)
		if err != nil {
			return nil, fmt.Errorf("helm configuration for namespace %s: %w", namespace, err)
		}
		d.fresh()
		getter := &restGetter{cfg: c, namespace: namespace, d: d}
		ac := new(action.Configuration)
		// Helm's debug log goes nowhere: the release outcome is reported
		// through Outcome and errors, and Helm's log lines may quote values.
		if err := ac.Init(getter, namespace, HelmDriver, func(string, ...any) {}); err != nil {
			return nil, fmt.Errorf("helm configuration for namespace %s: %w", namespace, err)
		}
		// Set, Helm renders with them instead of discovering anew before
		// every action (discovery.go).
		if ac.Capabilities, err = d.capabilities(); err != nil {
			return nil, fmt.Errorf("helm configuration for namespace %s: reading the API server's capabilities: %w", namespace, err)
		}
		return ac, nil
	}
}

// restGetter is a genericclioptions.RESTClientGetter over an in-memory
// rest.Config, without kubeconfig files or environment variables. Its
// discovery client and REST mapper are its identity's, shared by every
// configuration of that identity (discovery.go); Helm invalidates and
// resets them after it installs CRDs.
type restGetter struct {
	cfg       *rest.Config
	namespace string
	d         *identityDiscovery
}

func (g *restGetter) ToRESTConfig() (*rest.Config, error) { return rest.CopyConfig(g.cfg), nil }

func (g *restGetter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	return g.d.discovery, nil
}

func (g *restGetter) ToRESTMapper() (meta.RESTMapper, error) {
	return restmapper.NewShortcutExpander(missingKindMapper{ResettableRESTMapper: g.d.mapper, d: g.d}, g.d.discovery, func(string) {}), nil
}

// ToRawKubeConfigLoader only serves the namespace: Helm's kube client reads
// its default namespace from it.
func (g *restGetter) ToRawKubeConfigLoader() clientcmd.ClientConfig {
	return clientcmd.NewDefaultClientConfig(*clientcmdapi.NewConfig(),
		&clientcmd.ConfigOverrides{Context: clientcmdapi.Context{Namespace: g.namespace}})
}

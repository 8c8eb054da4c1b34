package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// registriesUsing are the registry hosts env reads the Secret secret for:
// spec.registry's prefix and pull prefix (credentialsRef), an oci
// source's repository (secretRef), a chart registry's URL prefix
// (chartCredentials). --docker-config without --registry copies only
// their entries, so a Secret never carries every registry of the
// developer's docker config, nor makes each credential helper answer.
func registriesUsing(env *v1alpha1.DevEnvironment, secret string) []string {
	var hosts []string
	spec := &env.Spec
	if r := spec.Registry; r != nil && r.CredentialsRef != nil && r.CredentialsRef.Name == secret {
		hosts = append(hosts, repositoryHost(r.Prefix))
		if r.PullPrefix != "" {
			hosts = append(hosts, repositoryHost(r.PullPrefix))
		}
	}
	for _, src := range spec.Sources {
		if src.OCI != nil && src.OCI.SecretRef != nil && src.OCI.SecretRef.Name == secret {
			hosts = append(hosts, repositoryHost(src.OCI.Repository))
		}
	}
	for _, cc := range spec.ChartCredentials {
		if cc.SecretRef.Name == secret {
			hosts = append(hosts, repositoryHost(strings.TrimPrefix(cc.URLPrefix, "oci://")))
		}
	}
	slices.Sort(hosts)
	return slices.DeleteFunc(slices.Compact(hosts), func(h string) bool { return h == "" })
}

// repositoryHost is the registry host of a repository or prefix, as a
// docker config keys it (Docker Hub's is index.docker.io).
func repositoryHost(repo string) string {
	repo = strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(repo, "https://"), "http://"), "/")
	if r, err := name.NewRepository(repo, name.WeakValidation); err == nil {
		return r.RegistryStr()
	}
	return registryHostOf(repo)
}

// neededRegistries reads env and says which registries --docker-config
// is to copy for the Secret secret.
func (a *app) neededRegistries(ctx context.Context, envName, secret string) ([]string, error) {
	_, env, err := a.connectFind(ctx, envName)
	if err != nil {
		return nil, err
	}
	if env == nil {
		return nil, fmt.Errorf("--docker-config copies only the registries devenvironment/%s reads secret/%s for, and it does not exist (yet): give them with --registry HOST", envName, secret)
	}
	hosts := registriesUsing(env, secret)
	if len(hosts) == 0 {
		return nil, fmt.Errorf("--docker-config copies only the registries devenvironment/%s reads secret/%s for, and it reads it for none (spec.registry.credentialsRef, an oci source's secretRef, spec.chartCredentials): give them with --registry HOST", envName, secret)
	}
	return hosts, nil
}

// known keeps the hosts the config has credentials for: an auths entry
// or a credHelpers entry of their own. The catch-all credsStore is not
// asked about a registry the developer never logged in to.
func (c *dockerConfig) known(hosts []string) (kept, skipped []string) {
	for _, h := range hosts {
		_, helper := c.ownHelper(h)
		if c.hasAuths(h) || helper {
			kept = append(kept, h)
		} else {
			skipped = append(skipped, h)
		}
	}
	return kept, skipped
}

func (c *dockerConfig) hasAuths(host string) bool {
	for k := range c.Auths {
		if registryHostOf(k) == host {
			return true
		}
	}
	return false
}

func (c *dockerConfig) ownHelper(host string) (string, bool) {
	for k, h := range c.CredHelpers {
		if registryHostOf(k) == host {
			return h, true
		}
	}
	return "", false
}

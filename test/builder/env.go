// Package builder builds the DevEnvironments tests create: unit tests,
// the envtest suites (through test/operatortest) and the e2e cases
// (through test/e2e) start from Env and add what the test is about, so
// a spec's shape is written once and a new field is set in one place.
// It holds no state and reaches no cluster or registry: the registry a
// spec points into is a host name it is given.
package builder

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// AppSource is the source a test pushes its tree as: the namespace's
// "src" repository at tag "dev" (EnvSpec.AppSource).
const AppSource = "app"

// EnvSpec builds a DevEnvironment: Env(ns, name), then what the test
// needs, then Obj (or Build for a copy). The methods write into one
// object, so a test may go on editing Obj's result like any literal.
type EnvSpec struct {
	registry string
	under    string // the registry path of the repositories; the namespace when ""
	https    bool   // the registry is reached over HTTPS: nothing marked insecure
	env      *v1alpha1.DevEnvironment
}

// Env starts an environment with an empty spec.
func Env(ns, name string) *EnvSpec {
	return &EnvSpec{env: &v1alpha1.DevEnvironment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}}
}

// In is the registry host (host:port) the sources and images of
// AppSource, PushedSource and Registry live in.
func (b *EnvSpec) In(registry string) *EnvSpec {
	b.registry = registry
	return b
}

// Under puts the repositories of Registry, AppSource and PushedSource
// under path in the registry instead of under the namespace: fixtures
// whose golden output names one path whatever namespace they run in.
func (b *EnvSpec) Under(path string) *EnvSpec {
	b.under = path
	return b
}

// HTTPS reaches the registry over HTTPS, as a real one is: the push prefix
// and the sources Registry, AppSource and PushedSource add after it are
// not marked insecure. Call it before them.
func (b *EnvSpec) HTTPS() *EnvSpec {
	b.https = true
	return b
}

// repositories is where the environment's repositories live:
// host/namespace, or host/path after Under.
func (b *EnvSpec) repositories() string {
	if b.under != "" {
		return b.registry + "/" + b.under
	}
	return b.registry + "/" + b.env.Namespace
}

// Obj is the environment built, the object itself.
func (b *EnvSpec) Obj() *v1alpha1.DevEnvironment { return b.env }

// Build is a copy of the environment built; each call a copy of its own.
func (b *EnvSpec) Build() *v1alpha1.DevEnvironment { return b.env.DeepCopy() }

// Spec is a copy of the spec built, for fixtures that name one spec and
// create it under several names (internal/cli's teamSpec).
func (b *EnvSpec) Spec() v1alpha1.DevEnvironmentSpec { return *b.env.Spec.DeepCopy() }

// Create creates the environment through c and returns it.
func (b *EnvSpec) Create(t testing.TB, c client.Writer) *v1alpha1.DevEnvironment {
	t.Helper()
	NewWithT(t).Expect(c.Create(context.Background(), b.env)).To(Succeed())
	return b.env
}

// Labels sets the environment's labels.
func (b *EnvSpec) Labels(labels map[string]string) *EnvSpec {
	b.env.Labels = labels
	return b
}

// Registry pushes the environment's images to the registry under its
// namespace (or Under's path), over plain HTTP unless HTTPS.
func (b *EnvSpec) Registry() *EnvSpec {
	return b.ImagePrefix(b.repositories())
}

// ImagePrefix pushes the built images under prefix, over plain HTTP
// unless HTTPS.
func (b *EnvSpec) ImagePrefix(prefix string) *EnvSpec {
	if b.env.Spec.Registry == nil {
		b.env.Spec.Registry = &v1alpha1.RegistrySpec{Insecure: !b.https}
	}
	b.env.Spec.Registry.Prefix = prefix
	return b
}

// RegistryCredentials pushes the images with the credentials of the
// Secret (registry.credentialsRef).
func (b *EnvSpec) RegistryCredentials(secret string) *EnvSpec {
	if b.env.Spec.Registry == nil {
		b.Registry()
	}
	b.env.Spec.Registry.CredentialsRef = &v1alpha1.LocalObjectReference{Name: secret}
	return b
}

// PullPrefix is where the nodes pull the built images from
// (registry.pullPrefix); without a push prefix yet, the images are pushed
// as Registry pushes them.
func (b *EnvSpec) PullPrefix(prefix string) *EnvSpec {
	if b.env.Spec.Registry == nil {
		b.Registry()
	}
	b.env.Spec.Registry.PullPrefix = prefix
	return b
}

// AppSource adds the source AppSource: the namespace's "src" repository
// at tag "dev".
func (b *EnvSpec) AppSource() *EnvSpec { return b.PushedSource(AppSource, "src") }

// PushedSource adds a source named name: the namespace's (or Under's)
// repository in the registry at tag "dev".
func (b *EnvSpec) PushedSource(name, repository string) *EnvSpec {
	return b.OCI(name, b.repositories()+"/"+repository)
}

// OCI adds a source named name: repository (host/path, in any registry)
// at tag "dev", over plain HTTP unless HTTPS.
func (b *EnvSpec) OCI(name, repository string) *EnvSpec {
	s := OCISource(name, repository, "dev")
	s.OCI.Insecure = !b.https
	return b.Source(s)
}

// SourceSecret fetches the source name (git or OCI) with the credentials
// of the Secret (secretRef).
func (b *EnvSpec) SourceSecret(name, secret string) *EnvSpec {
	ref := &v1alpha1.LocalObjectReference{Name: secret}
	for i := range b.env.Spec.Sources {
		s := &b.env.Spec.Sources[i]
		switch {
		case s.Name != name:
		case s.Git != nil:
			s.Git.SecretRef = ref
		case s.OCI != nil:
			s.OCI.SecretRef = ref
		}
	}
	return b
}

// SourceRepository moves the source AppSource to the namespace's
// repository repo.
func (b *EnvSpec) SourceRepository(repo string) *EnvSpec {
	for _, s := range b.env.Spec.Sources {
		if s.Name == AppSource && s.OCI != nil {
			s.OCI.Repository = b.repositories() + "/" + repo
		}
	}
	return b
}

// Interval checks the source name for changes every d.
func (b *EnvSpec) Interval(name string, d time.Duration) *EnvSpec {
	for i := range b.env.Spec.Sources {
		if b.env.Spec.Sources[i].Name == name {
			b.env.Spec.Sources[i].Interval = &metav1.Duration{Duration: d}
		}
	}
	return b
}

// Source adds sources, in order.
func (b *EnvSpec) Source(s ...v1alpha1.Source) *EnvSpec {
	b.env.Spec.Sources = append(b.env.Spec.Sources, s...)
	return b
}

// ServiceAccount deploys as the named ServiceAccount.
func (b *EnvSpec) ServiceAccount(name string) *EnvSpec {
	b.env.Spec.ServiceAccountName = name
	return b
}

// ChartCredentials gives the chart repositories under urlPrefix the
// credentials of the Secret.
func (b *EnvSpec) ChartCredentials(urlPrefix, secret string) *EnvSpec {
	b.env.Spec.ChartCredentials = append(b.env.Spec.ChartCredentials, v1alpha1.ChartCredentials{
		URLPrefix: urlPrefix, SecretRef: v1alpha1.LocalObjectReference{Name: secret}})
	return b
}

// Components adds components, in order.
func (b *EnvSpec) Components(c ...v1alpha1.Component) *EnvSpec {
	b.env.Spec.Components = append(b.env.Spec.Components, c...)
	return b
}

// Tests adds test suites.
func (b *EnvSpec) Tests(s ...v1alpha1.TestSuite) *EnvSpec {
	b.env.Spec.Tests = append(b.env.Spec.Tests, s...)
	return b
}

// OCISource is a source from an OCI repository reached over plain HTTP,
// as the test registries are.
func OCISource(name, repository, tag string) v1alpha1.Source {
	return v1alpha1.Source{Name: name, OCI: &v1alpha1.OCISource{Repository: repository, Tag: tag, Insecure: true}}
}

// GitSource is a source cloned from the git repository at url.
func GitSource(name, url string) v1alpha1.Source {
	return v1alpha1.Source{Name: name, Git: &v1alpha1.GitSource{URL: url}}
}

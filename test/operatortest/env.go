package operatortest

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// AppSource is the source EnvSpec.AppSource adds: what a test pushed to
// its namespace's "src" repository at tag "dev" (AppFiles).
const AppSource = "app"

// SharedSource is the source EnvSpec.SharedSource adds: a README pushed
// once for every test, for environments whose components the scripted
// deploy engine answers for.
const SharedSource = "src"

// SharedSourceRepository is SharedSource's repository in Registry.
const SharedSourceRepository = "team/src"

// EnvSpec builds a DevEnvironment: Env(ns, name), then what the test
// needs, then Obj. The methods write into one object, so a test may go on
// editing the result like any literal.
type EnvSpec struct{ env *v1alpha1.DevEnvironment }

// Env starts an environment with an empty spec.
func Env(ns, name string) *EnvSpec {
	return &EnvSpec{env: &v1alpha1.DevEnvironment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}}
}

// Obj is the environment built.
func (b *EnvSpec) Obj() *v1alpha1.DevEnvironment { return b.env }

// Create creates the environment as the admin and returns it.
func (b *EnvSpec) Create(t testing.TB) *v1alpha1.DevEnvironment {
	t.Helper()
	NewWithT(t).Expect(Admin.Create(context.Background(), b.env)).To(Succeed())
	return b.env
}

// Registry pushes the environment's images to Registry under its
// namespace, over plain HTTP.
func (b *EnvSpec) Registry() *EnvSpec {
	b.env.Spec.Registry = &v1alpha1.RegistrySpec{Prefix: Registry.Host + "/" + b.env.Namespace, Insecure: true}
	return b
}

// AppSource adds the source AppSource: the namespace's "src" repository
// in Registry at tag "dev", where AppFiles pushes.
func (b *EnvSpec) AppSource() *EnvSpec { return b.PushedSource(AppSource, "src") }

// PushedSource adds a source named name: the namespace's repository in
// Registry at tag "dev".
func (b *EnvSpec) PushedSource(name, repository string) *EnvSpec {
	return b.Source(OCISource(name, Registry.Host+"/"+b.env.Namespace+"/"+repository, "dev"))
}

// SharedSource adds the source SharedSource, the same for every test.
func (b *EnvSpec) SharedSource() *EnvSpec {
	return b.Source(OCISource(SharedSource, Registry.Host+"/"+SharedSourceRepository, "latest"))
}

// Source adds a source.
func (b *EnvSpec) Source(s v1alpha1.Source) *EnvSpec {
	b.env.Spec.Sources = append(b.env.Spec.Sources, s)
	return b
}

// PullPrefix is the registry prefix the cluster pulls the images from.
func (b *EnvSpec) PullPrefix(prefix string) *EnvSpec {
	b.env.Spec.Registry.PullPrefix = prefix
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

// Deployer acts as the ServiceAccount DeployNamespace makes.
func (b *EnvSpec) Deployer() *EnvSpec { return b.ServiceAccount(Deployer) }

// ServiceAccount acts as the named ServiceAccount.
func (b *EnvSpec) ServiceAccount(name string) *EnvSpec {
	b.env.Spec.ServiceAccountName = name
	return b
}

// OCISource is a source from an OCI repository reached over plain HTTP,
// as Registry's are.
func OCISource(name, repository, tag string) v1alpha1.Source {
	return v1alpha1.Source{Name: name, OCI: &v1alpha1.OCISource{Repository: repository, Tag: tag, Insecure: true}}
}

// Manifests is a component applying the manifests under paths of
// AppSource.
func Manifests(name string, paths ...string) v1alpha1.Component {
	return v1alpha1.Component{Name: name, Manifests: &v1alpha1.ManifestsSpec{Source: AppSource, Paths: paths}}
}

// Chart is a component installing the chart at path in AppSource with
// values (JSON; empty for none).
func Chart(name, path, values string) v1alpha1.Component {
	h := &v1alpha1.HelmSpec{Chart: v1alpha1.ChartRef{Source: AppSource, Path: path}}
	if values != "" {
		h.Values = &apiextensionsv1.JSON{Raw: []byte(values)}
	}
	return v1alpha1.Component{Name: name, Helm: h}
}

// After makes c depend on the named components.
func After(c v1alpha1.Component, dependsOn ...string) v1alpha1.Component {
	c.DependsOn = append(c.DependsOn, dependsOn...)
	return c
}

// ScriptedComponent is a component ScriptedDeploy answers for (outside
// the namespaces given to UseDeployEngine), reading SharedSource.
func ScriptedComponent(name string, dependsOn ...string) v1alpha1.Component {
	return v1alpha1.Component{Name: name, DependsOn: dependsOn, Manifests: &v1alpha1.ManifestsSpec{Source: SharedSource}}
}

// BusyboxSuite is a test suite running busybox, echoing its name.
func BusyboxSuite(name string, labels ...string) v1alpha1.TestSuite {
	return v1alpha1.TestSuite{Name: name, Labels: labels, Image: v1alpha1.TestImage{Ref: "busybox:1.36"},
		Command: []string{"sh", "-c", "echo testing " + name}}
}

package operatortest

import (
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"

	"k8s.io/apimachinery/pkg/api/resource"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// Runner is the ServiceAccount test suites run as (EnvSpec.AsRunner),
// made by RunnerNamespace and TestsEnv with every right in its namespace.
const Runner = "runner"

// RunnerNamespace is a Namespace with the ServiceAccount Runner.
func RunnerNamespace(t testing.TB) string {
	t.Helper()
	ns := Namespace(t)
	CreateDeployer(t, ns, Runner)
	return ns
}

// TestsEnv makes the ServiceAccount Runner in ns and starts an
// environment of the suites only, "tests", run as Runner.
func TestsEnv(t testing.TB, ns string, suites ...*SuiteSpec) *EnvSpec {
	t.Helper()
	CreateDeployer(t, ns, Runner)
	return Env(ns, "tests").AsRunner().Suites(suites...)
}

// ReadyTestsEnv creates TestsEnv with the suites in a Namespace of its
// own and returns it once it is Ready.
func ReadyTestsEnv(t testing.TB, suites ...*SuiteSpec) *v1alpha1.DevEnvironment {
	t.Helper()
	env := TestsEnv(t, Namespace(t), suites...).Create(t)
	return WaitForEnv(t, client.ObjectKeyFromObject(env), ExpectReadyAndCurrent)
}

// HistoryLimit is how many runs of each suite status keeps.
func (b *EnvSpec) HistoryLimit(n int32) *EnvSpec {
	b.env.Spec.HistoryLimit = &n
	return b
}

// ExpectReadyCurrent: the environment is Ready for its current generation
// (ExpectReadyAndCurrent) and kstatus reads it as Current, how a test of
// runs that leave the environment alone ends.
func ExpectReadyCurrent(t testing.TB, env *v1alpha1.DevEnvironment) {
	t.Helper()
	ExpectReadyAndCurrent(NewWithT(t), env)
	ExpectKstatus(t, env, status.CurrentStatus)
}

// AsRunner acts as the ServiceAccount Runner.
func (b *EnvSpec) AsRunner() *EnvSpec { return b.ServiceAccount(Runner) }

// Suites adds the test suites built.
func (b *EnvSpec) Suites(s ...*SuiteSpec) *EnvSpec {
	for _, suite := range s {
		b.Tests(suite.Obj())
	}
	return b
}

// SuiteSpec builds a TestSuite: Suite or BuiltSuite, then what the test
// needs, then EnvSpec.Suites (or Obj).
type SuiteSpec struct{ suite v1alpha1.TestSuite }

// Suite starts a suite running busybox, echoing its name
// (BusyboxSuite), triggered by hand.
func Suite(name string, labels ...string) *SuiteSpec {
	return &SuiteSpec{suite: BusyboxSuite(name, labels...)}
}

// BuiltSuite starts a suite running command in the built image, with
// AppSource checked out.
func BuiltSuite(name, image string, command ...string) *SuiteSpec {
	return &SuiteSpec{suite: v1alpha1.TestSuite{Name: name, Source: AppSource, Image: v1alpha1.TestImage{Built: image}, Command: command}}
}

// Obj is the suite built.
func (s *SuiteSpec) Obj() v1alpha1.TestSuite { return s.suite }

// After makes the suite wait for the named components to be Ready and
// suites to pass.
func (s *SuiteSpec) After(dependsOn ...string) *SuiteSpec {
	s.suite.DependsOn = append(s.suite.DependsOn, dependsOn...)
	return s
}

// OnChange runs the suite by itself, once per set of digests it tests.
func (s *SuiteSpec) OnChange() *SuiteSpec {
	s.suite.Trigger = v1alpha1.TriggerOnChange
	return s
}

// Env adds an environment variable of the test container.
func (s *SuiteSpec) Env(name, value string) *SuiteSpec {
	s.suite.Env = append(s.suite.Env, v1alpha1.EnvVar{Name: name, Value: value})
	return s
}

// Params are the variables a trigger may set.
func (s *SuiteSpec) Params(names ...string) *SuiteSpec {
	s.suite.Params = append(s.suite.Params, names...)
	return s
}

// Cache gives the suite a cache claim of the size.
func (s *SuiteSpec) Cache(size string) *SuiteSpec {
	q := resource.MustParse(size)
	s.suite.Cache = &v1alpha1.TestCache{Size: &q}
	return s
}

// Token mounts the ServiceAccount's token in the test pod (asks: true).
func (s *SuiteSpec) Token(asks bool) *SuiteSpec {
	s.suite.ServiceAccountToken = asks
	return s
}

// JUnit reads the suite's results from the JUnit report at path, relative
// to the workspace.
func (s *SuiteSpec) JUnit(path string) *SuiteSpec {
	s.suite.Report = &v1alpha1.TestReport{Path: path, Format: v1alpha1.ReportJUnit}
	return s
}

// WebTestsEnv is WebEnv run as Runner, with the suites.
func WebTestsEnv(ns string, suites ...*SuiteSpec) *v1alpha1.DevEnvironment {
	env := WebEnv(ns)
	env.Spec.ServiceAccountName = Runner
	for _, s := range suites {
		env.Spec.Tests = append(env.Spec.Tests, s.Obj())
	}
	return env
}

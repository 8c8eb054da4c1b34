package operatortest

import (
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/builder"
)

// Runner is the ServiceAccount test suites run as (builder.EnvSpec.ServiceAccount),
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
func TestsEnv(t testing.TB, ns string, suites ...*builder.SuiteSpec) *builder.EnvSpec {
	t.Helper()
	CreateDeployer(t, ns, Runner)
	return Env(ns, "tests").ServiceAccount(Runner).Suites(suites...)
}

// ReadyTestsEnv creates TestsEnv with the suites in a Namespace of its
// own and returns it once it is Ready.
func ReadyTestsEnv(t testing.TB, suites ...*builder.SuiteSpec) *v1alpha1.DevEnvironment {
	t.Helper()
	env := TestsEnv(t, Namespace(t), suites...).Create(t, Admin)
	return WaitForEnv(t, client.ObjectKeyFromObject(env), ExpectReadyAndCurrent)
}

// ExpectReadyCurrent: the environment is Ready for its current generation
// (ExpectReadyAndCurrent) and kstatus reads it as Current, how a test of
// runs that leave the environment alone ends.
func ExpectReadyCurrent(t testing.TB, env *v1alpha1.DevEnvironment) {
	t.Helper()
	ExpectReadyAndCurrent(NewWithT(t), env)
	ExpectKstatus(t, env, status.CurrentStatus)
}

// WebTestsEnv is WebEnv run as Runner, with the suites.
func WebTestsEnv(ns string, suites ...*builder.SuiteSpec) *v1alpha1.DevEnvironment {
	env := WebEnv(ns)
	env.Spec.ServiceAccountName = Runner
	for _, s := range suites {
		env.Spec.Tests = append(env.Spec.Tests, s.Obj())
	}
	return env
}

package build_test

import (
	"io"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// TestRunningWarmBuildShowsItsLogTail is issue 18 item 11 in status: a
// warm build still compiling has the end of its output in
// status.components[].images[].build.logTail, brought up to date while it
// runs, not only once it failed.
func TestRunningWarmBuildShowsItsLogTail(t *testing.T) {
	ns, _ := apiNamespace(t)
	operatortest.WarmExec.HangIn(ns)
	// The fetch step succeeds; the run step compiles until it is stopped.
	operatortest.WarmExec.Answer(func(_ []string, _, _ io.Writer) error { return nil })
	env := warmAPIEnv(ns)
	env.Spec.Components[0].Images[0].Run.Timeout = &metav1.Duration{Duration: time.Minute}
	key := operatortest.CreateEnv(t, env)
	operatortest.RunPod(t, ns, warmAPIPod)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		st := env.Status.Component("api").Image("api")
		g.Expect(st).NotTo(BeNil())
		g.Expect(st.Build).NotTo(BeNil())
		g.Expect(st.Build.Result).To(Equal(v1alpha1.BuildRunning))
		g.Expect(st.Build.LogTail).To(ContainSubstring("compiling forever"))
	})
	operatortest.ExpectKstatus(t, env, status.InProgressStatus)
}

package build_test

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// TestRunningWarmBuildShowsItsLogTail is issue 18 item 11 in status: a
// warm build still compiling has the end of its output in
// status.components[].images[].build.logTail, brought up to date while it
// runs, not only once it failed.
func TestRunningWarmBuildShowsItsLogTail(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := operatortest.Namespace(t)
	operatortest.WarmExec.HangIn(ns)
	// The fetch step succeeds; the run step compiles until it is stopped.
	operatortest.WarmExec.Answer(func(_ []string, _, _ io.Writer) error { return nil })
	operatortest.AppFiles(t, ns, map[string]string{"cmd/api/main.go": "package main // " + ns + "\n"})
	operatortest.CreateDeployer(t, ns, "deployer")
	env := operatortest.APIEnv(ns)
	env.Spec.ServiceAccountName = "deployer"
	img := &env.Spec.Components[0].Images[0]
	img.Platforms = []string{"linux/amd64"}
	img.Run.KeepWarm = true
	img.Run.Timeout = &metav1.Duration{Duration: time.Minute}
	g.Expect(operatortest.Admin.Create(ctx, env)).To(Succeed())
	operatortest.RunPod(t, ns, build.WarmPodName("api", "api", "linux/amd64"))
	env = operatortest.WaitForEnv(t, client.ObjectKeyFromObject(env), func(g Gomega, env *v1alpha1.DevEnvironment) {
		st := env.Status.Component("api").Image("api")
		g.Expect(st).NotTo(BeNil())
		g.Expect(st.Build).NotTo(BeNil())
		g.Expect(st.Build.Result).To(Equal(v1alpha1.BuildRunning))
		g.Expect(st.Build.LogTail).To(ContainSubstring("compiling forever"))
	})
	operatortest.ExpectKstatus(t, env, status.InProgressStatus)
}

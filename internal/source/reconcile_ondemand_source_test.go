package source_test

import (
	"context"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/builder"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// TestASourceOnlyAnOnDemandComponentReadsIsNotWaitedFor (issue 42, seen
// on Dynamo's real tree): a source read only by a component on demand
// (the unit suite's image, built from envtest's binaries a team pushes
// once) holds nothing up while that component is down: the environment
// turns Ready on its other, pushed source. Brought up, the component
// waits for the push, naming the source, and the environment reads
// Waiting until it comes, then Ready.
func TestASourceOnlyAnOnDemandComponentReadsIsNotWaitedFor(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := operatortest.DeployNamespace(t)
	tools := crdsComponent()
	tools.OnDemand = true
	env := operatortest.Env(ns, "ondemand").ServiceAccount(operatortest.Deployer).AppSource().PushedSource("crds", "crds").
		Components(builder.Component("config", builder.Manifests("deploy")), tools).Create(t, operatortest.Admin)
	key := client.ObjectKeyFromObject(env)
	operatortest.Registry.PushSource(t, ns+"/src", "dev", map[string]string{"deploy/config.yaml": appConfig("pushed")})

	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		g.Expect(env.Status.Component("crds")).NotTo(BeNil())
		g.Expect(env.Status.Component("crds").Phase).To(Equal(v1alpha1.PhaseDisabled))
	})
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)

	// Brought up (kubectl devloop up): it waits for its source's push.
	patch := []byte(`{"metadata":{"annotations":{"` + v1alpha1.UpAnnotation + `":"crds"}}}`)
	g.Expect(operatortest.Admin.Patch(ctx, env, client.RawPatch(types.MergePatchType, patch))).To(Succeed())
	repo := operatortest.Registry.Host + "/" + ns + "/crds"
	operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		crds := env.Status.Component("crds")
		g.Expect(crds).NotTo(BeNil())
		g.Expect(crds.Phase).To(Equal(v1alpha1.PhasePending))
		g.Expect(crds.Message).To(ContainSubstring("waiting for the first push to " + repo + ":dev"))
		ready := operatortest.EnvCondition(env, v1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Reason).To(Equal(v1alpha1.ReasonWaiting), "conditions: %s", operatortest.ConditionsSummary(env))
		g.Expect(ready.Message).To(ContainSubstring("spec.sources[1] (crds): waiting for the first push"))
	})

	operatortest.Registry.PushSource(t, ns+"/crds", "dev", map[string]string{"deploy/crds.yaml": crdsConfig("up")})
	operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		g.Expect(env.Status.Component("crds").Phase).To(Equal(v1alpha1.PhaseReady))
	})
	g.Expect(appliedConfig(t, ns, "crds-config")).To(Equal("up"))
}

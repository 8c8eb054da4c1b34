package source_test

import (
	"context"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/builder"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// TestComponentOfAPushedSourceDoesNotWaitForAnother (issue 42, seen on
// stakater/ipshield's tree): with two pushed sources, the second pushed
// before the first ever was, the component that reads only the second
// applies at once; the one reading the first waits for its push (Pending,
// naming the source), and the environment reads Waiting, not Stalled,
// until it comes. Two environments in two namespaces, the operator under
// the chart's RBAC: one's waiting source holds nothing of the other's.
func TestComponentOfAPushedSourceDoesNotWaitForAnother(t *testing.T) {
	type run struct {
		ns  string
		key client.ObjectKey
	}
	var runs []run
	for i := range 2 {
		ns := operatortest.DeployNamespace(t)
		name := []string{"first", "second"}[i]
		env := operatortest.Env(ns, name).ServiceAccount(operatortest.Deployer).AppSource().PushedSource("crds", "crds").
			Components(builder.Component("config", builder.Manifests("deploy")), crdsComponent()).Create(t, operatortest.Admin)
		runs = append(runs, run{ns, client.ObjectKeyFromObject(env)})
		// Only the second source is pushed.
		operatortest.Registry.PushSource(t, ns+"/crds", "dev", map[string]string{"deploy/crds.yaml": crdsConfig(name)})
	}

	for _, r := range runs {
		g := NewWithT(t)
		repo := operatortest.Registry.Host + "/" + r.ns + "/src"
		env := operatortest.WaitForEnv(t, r.key, func(g Gomega, env *v1alpha1.DevEnvironment) {
			g.Expect(env.Status.ObservedGeneration).To(Equal(env.Generation))
			crds := env.Status.Component("crds")
			g.Expect(crds).NotTo(BeNil())
			g.Expect(crds.Phase).To(Equal(v1alpha1.PhaseReady), "crds: %s", crds.Message)
			config := env.Status.Component("config")
			g.Expect(config).NotTo(BeNil())
			g.Expect(config.Phase).To(Equal(v1alpha1.PhasePending))
			g.Expect(config.Message).To(ContainSubstring("waiting for the first push to " + repo + ":dev"))
			g.Expect(env.Status.Source("crds")).NotTo(BeNil())
			g.Expect(env.Status.Source("crds").Revision).NotTo(BeEmpty())
			ready := operatortest.EnvCondition(env, v1alpha1.ConditionReady)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Reason).To(Equal(v1alpha1.ReasonWaiting), "conditions: %s", operatortest.ConditionsSummary(env))
			g.Expect(ready.Message).To(ContainSubstring("spec.sources[0] (app): waiting for the first push to " + repo + ":dev"))
			g.Expect(operatortest.EnvCondition(env, v1alpha1.ConditionStalled)).To(BeNil())
		})
		operatortest.ExpectKstatus(t, env, status.InProgressStatus)
		g.Expect(appliedConfig(t, r.ns, "crds-config")).To(Equal(r.key.Name), "the second source's component applied its objects")
		g.Expect(appliedConfig(t, r.ns, "app-config")).To(BeEmpty(), "nothing of the unpushed source")
	}

	// The first environment's first push: it turns Ready; the other
	// still waits for its own.
	first, second := runs[0], runs[1]
	operatortest.Registry.PushSource(t, first.ns+"/src", "dev", map[string]string{"deploy/config.yaml": appConfig("pushed")})
	env := operatortest.WaitForEnv(t, first.key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
	})
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)
	NewWithT(t).Expect(configVersion(t, first.ns)).To(Equal("pushed"))
	env = operatortest.WaitForEnv(t, second.key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		ready := operatortest.EnvCondition(env, v1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).To(Equal(v1alpha1.ReasonWaiting))
		g.Expect(env.Status.Component("crds")).NotTo(BeNil())
		g.Expect(env.Status.Component("crds").Phase).To(Equal(v1alpha1.PhaseReady))
	})
	operatortest.ExpectKstatus(t, env, status.InProgressStatus)
}

// crdsComponent applies the "crds" source's deploy directory.
func crdsComponent() v1alpha1.Component {
	c := builder.Component("crds", builder.Manifests("deploy"))
	c.Manifests.Source = "crds"
	return c
}

func crdsConfig(version string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: crds-config\ndata:\n  version: \"" + version + "\"\n"
}

// appliedConfig is the version in the named ConfigMap ("" when there is
// none).
func appliedConfig(t *testing.T, ns, name string) string {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := operatortest.Admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cm); err != nil {
		return ""
	}
	return cm.Data["version"]
}

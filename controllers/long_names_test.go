package controllers_test

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/builder"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// TestLongEnvironmentNameDeploysAndTests: an environment's name may be 253
// characters, a label value only 63. A 100-character environment applies
// its manifests and runs a test Job, every label it writes valid and the
// one value its selectors look for.
func TestLongEnvironmentNameDeploysAndTests(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := operatortest.Namespace(t)
	env := operatortest.DeployDirEnv(t, ns, map[string]string{"deploy/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\n"})
	env.Name = strings.Repeat("long-", 20)[:99] + "x"
	env.Spec.Tests = []v1alpha1.TestSuite{builder.BusyboxSuite("unit")}
	g.Expect(operatortest.Admin.Create(ctx, env)).To(Succeed())
	operatortest.WaitForEnv(t, client.ObjectKeyFromObject(env), operatortest.ExpectReadyAndCurrent)

	cm := &corev1.ConfigMap{}
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "settings"}, cm)).To(Succeed())
	label := cm.Labels[v1alpha1.LabelEnvironment]
	g.Expect(validation.IsValidLabelValue(label)).To(BeEmpty())
	g.Expect(label).To(Equal(v1alpha1.LabelValue(env.Name)))

	operatortest.Annotate(t, env, v1alpha1.TriggerAnnotation, "unit")
	_, run := operatortest.ExpectRun(t, env, "unit", 1, v1alpha1.ResultRunning)
	job := operatortest.WaitForJob(t, ns, run.JobName)
	g.Expect(len(job.Name)).To(BeNumerically("<=", 63))
	g.Expect(job.Labels).To(HaveKeyWithValue(v1alpha1.LabelEnvironment, label))
}

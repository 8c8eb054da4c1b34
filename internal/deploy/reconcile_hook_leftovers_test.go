package deploy_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/builder"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// installHookEnv is an environment in a fresh namespace installing the
// installhook chart (a pre-install hook Job, kept by Helm's
// before-hook-creation policy) as release "init", and the key of its
// hook Job once Helm created it.
func installHookEnv(t *testing.T) (client.ObjectKey, client.ObjectKey) {
	t.Helper()
	ns := operatortest.Namespace(t)
	env := operatortest.DeployDirEnv(t, ns, operatortest.ChartFiles(t, "installhook", "chart"))
	env.Spec.Components[0].Manifests = nil
	env.Spec.Components[0].Helm = &v1alpha1.HelmSpec{Chart: v1alpha1.ChartRef{Source: builder.AppSource, Path: "chart"}}
	key := operatortest.CreateEnv(t, env)
	job := operatortest.WaitForJob(t, ns, "init-setup")
	NewWithT(t).Expect(job.Annotations).To(HaveKeyWithValue(v1alpha1.AnnotationOwner, key.String()))
	return key, client.ObjectKeyFromObject(job)
}

// TestDeletedEnvironmentLeavesNoHookJob is issue 32.7: Helm's uninstall
// deletes a release's manifest but not its hooks, so a hook Job stayed in
// the namespace after its environment was deleted, still carrying the
// owner annotation. Deleting an environment removes its hook Jobs: one
// that completed (the release deployed), and one still running (the
// install in flight when the environment went). Another environment's
// hook Job, in another namespace, stays.
func TestDeletedEnvironmentLeavesNoHookJob(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()

	completed, completedJob := installHookEnv(t)
	operatortest.EndJob(t, completedJob.Namespace, completedJob.Name, true)
	operatortest.WaitForEnv(t, completed, operatortest.ExpectReadyAndCurrent)
	running, runningJob := installHookEnv(t)
	operatortest.WaitForPhase(t, running, v1alpha1.PhaseDeploying)

	g.Expect(operatortest.Admin.Delete(ctx, operatortest.Env(completed.Namespace, completed.Name).Obj())).To(Succeed())
	operatortest.ExpectEnvGone(t, completed.Namespace, completed.Name)
	operatortest.ExpectGone(t, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: completedJob.Namespace, Name: completedJob.Name}})
	g.Expect(operatortest.ReleaseSecrets(t, completed.Namespace, "init")).To(BeZero())
	g.Expect(apierrors.IsNotFound(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: completed.Namespace, Name: "init-config"}, &corev1.ConfigMap{}))).
		To(BeTrue(), "the release's manifest is uninstalled")
	g.Expect(operatortest.Admin.Get(ctx, runningJob, &batchv1.Job{})).To(Succeed(), "the other environment's hook Job stays")

	g.Expect(operatortest.Admin.Delete(ctx, operatortest.Env(running.Namespace, running.Name).Obj())).To(Succeed())
	operatortest.ExpectEnvGone(t, running.Namespace, running.Name)
	operatortest.ExpectGone(t, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: runningJob.Namespace, Name: runningJob.Name}})
}

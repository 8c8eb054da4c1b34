package controllers_test

import (
	"context"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// TestBuilderJobOutOfTheCacheIsNotWaitedOn: the operator caches only Jobs
// labelled as its builder or test Jobs (CacheOptions). A builder Job that
// loses its role label drops out of the cache while its name is still
// taken: the build must not take the name as its own Job started and wait
// on it for ever, but stall naming it, and leave it alone.
func TestBuilderJobOutOfTheCacheIsNotWaitedOn(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := operatortest.Namespace(t)
	operatortest.AppFiles(t, ns, map[string]string{"cmd/api/main.go": "package main\n"})
	operatortest.CreateDeployer(t, ns, "deployer")
	env := operatortest.AsDeployer(operatortest.APIEnv(ns))
	env.Spec.Components[0].Images[0].Platforms = []string{"linux/amd64"}
	g.Expect(operatortest.Admin.Create(ctx, env)).To(Succeed())
	job := operatortest.WaitForBuilderJob(t, ns, "linux-amd64")

	delete(job.Labels, v1alpha1.LabelRole)
	g.Expect(operatortest.Admin.Update(ctx, &job)).To(Succeed())
	operatortest.RequestReconcile(t, env)
	env = operatortest.WaitForStalled(t, client.ObjectKeyFromObject(env), "", "builder Job "+job.Name+" exists and belongs to another owner")
	kept := &batchv1.Job{}
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKeyFromObject(&job), kept)).To(Succeed())
	g.Expect(kept.UID).To(Equal(job.UID))
	g.Expect(kept.DeletionTimestamp).To(BeNil())
	operatortest.ExpectKstatus(t, env, status.FailedStatus)
}

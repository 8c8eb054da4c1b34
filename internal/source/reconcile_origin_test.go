package source_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/source"
	"github.com/devloop-dev/devloop/test/builder"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// Issue 31, item 1, through the operator under the chart's RBAC: tenant A
// deploys a private OCI artifact; tenant B, in another namespace, reads
// A's digest and names it in a repository of a registry it runs, which
// answers every HEAD with that digest. B must get a Stalled condition
// naming its source, and nothing of A's content.
func TestOCIDigestReusedThroughALyingRegistryIsRefused(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const user, password = "tenant-a", "a-Pa55word"
	host, digest := source.PrivateRegistry(t, user, password, map[string]string{
		"deploy/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: private-settings}\ndata: {token: private-value}\n",
	})
	nsA, nsB := operatortest.DeployNamespace(t), operatortest.DeployNamespace(t)
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	g.Expect(operatortest.Admin.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "registry-creds"},
		Type:       corev1.SecretTypeDockerConfigJson,
		StringData: map[string]string{corev1.DockerConfigJsonKey: fmt.Sprintf(`{"auths":{"http://%s":{"auth":%q}}}`, host, auth)},
	})).To(Succeed())
	a := operatortest.Env(nsA, "tenant-a").ServiceAccount(operatortest.Deployer).Source(v1alpha1.Source{Name: builder.AppSource, OCI: &v1alpha1.OCISource{
		Repository: host + "/team-a/private", Digest: digest, Insecure: true,
		SecretRef: &v1alpha1.LocalObjectReference{Name: "registry-creds"}}}).
		Components(builder.Component("config", builder.Manifests("deploy"))).Create(t, operatortest.Admin)
	operatortest.WaitForEnv(t, client.ObjectKeyFromObject(a), operatortest.ExpectReadyAndCurrent)
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: nsA, Name: "private-settings"}, &corev1.ConfigMap{})).To(Succeed())

	liar, gets := source.LyingRegistry(t, digest)
	b := operatortest.Env(nsB, "tenant-b").ServiceAccount(operatortest.Deployer).Source(v1alpha1.Source{Name: builder.AppSource, OCI: &v1alpha1.OCISource{
		Repository: liar + "/x", Digest: digest, Insecure: true}}).
		Components(builder.Component("config", builder.Manifests("deploy"))).Create(t, operatortest.Admin)
	operatortest.WaitForEnv(t, client.ObjectKeyFromObject(b), func(g Gomega, env *v1alpha1.DevEnvironment) {
		stalled := operatortest.EnvCondition(env, v1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil(), "conditions: %s", operatortest.ConditionsSummary(env))
		g.Expect(stalled.Reason).To(Equal(v1alpha1.ReasonSourceFailed))
		g.Expect(stalled.Message).To(ContainSubstring("spec.sources[0].oci"))
		g.Expect(stalled.Message).To(ContainSubstring("not found"))
		g.Expect(stalled.Message).NotTo(ContainSubstring("private-value"))
	})
	g.Expect(gets()).NotTo(BeZero(), "B's registry was never asked for the content")
	g.Expect(apierrors.IsNotFound(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: nsB, Name: "private-settings"}, &corev1.ConfigMap{}))).
		To(BeTrue(), "tenant B deployed tenant A's private content")
}

package source_test

import (
	"context"
	"path/filepath"
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

// gitEnv deploys the manifests under deploy/ of a git source pinned to
// commit, after the sources env already has.
func gitEnv(env *builder.EnvSpec, url, commit string, secret *v1alpha1.LocalObjectReference) *builder.EnvSpec {
	return env.ServiceAccount(operatortest.Deployer).Source(v1alpha1.Source{Name: builder.AppSource, Git: &v1alpha1.GitSource{
		URL: url, Ref: &v1alpha1.GitRef{Commit: commit}, SecretRef: secret}}).
		Components(builder.Component("config", builder.Manifests("deploy")))
}

// Crossing 1 of issue 17: the source store is shared by every
// environment, and a pinned commit needs no resolution. Tenant A, with
// credentials, fetches a commit of its private repository; tenant B, in
// another namespace and without credentials, pinning the same commit (in
// full or as a short SHA) must get nothing of it: a Stalled condition
// naming the field, and no object from the private content.
func TestSourceCacheIsNotServedToATenantWithoutAccess(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const user, password = "tenant-a", "a-Pa55word"
	url, commit := source.PrivateGitServer(t, user, password, map[string]string{
		"deploy/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: private-settings}\ndata: {token: private-value}\n",
	})

	nsA, nsB := operatortest.DeployNamespace(t), operatortest.DeployNamespace(t)
	g.Expect(operatortest.Admin.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "git-creds"},
		StringData: map[string]string{"username": user, "password": password},
	})).To(Succeed())

	a := gitEnv(operatortest.Env(nsA, "tenant-a"), url, commit, &v1alpha1.LocalObjectReference{Name: "git-creds"}).Create(t, operatortest.Admin)
	operatortest.WaitForEnv(t, client.ObjectKeyFromObject(a), operatortest.ExpectReadyAndCurrent)
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: nsA, Name: "private-settings"}, &corev1.ConfigMap{})).To(Succeed())

	// B's first source is a public one of its own, so the refused one is
	// spec.sources[1].
	operatortest.AppFiles(t, nsB, map[string]string{"README": "public"})
	for _, tc := range []struct{ name, commit string }{
		{"tenant-b", commit},
		{"tenant-b-short", commit[:7]},
	} {
		b := gitEnv(operatortest.Env(nsB, tc.name).PushedSource("public", "src"), url, tc.commit, nil).Create(t, operatortest.Admin)
		operatortest.WaitForEnv(t, client.ObjectKeyFromObject(b), func(g Gomega, env *v1alpha1.DevEnvironment) {
			stalled := operatortest.EnvCondition(env, v1alpha1.ConditionStalled)
			g.Expect(stalled).NotTo(BeNil(), "conditions: %s", operatortest.ConditionsSummary(env))
			g.Expect(stalled.Reason).To(Equal(v1alpha1.ReasonSourceFailed))
			g.Expect(stalled.Message).To(ContainSubstring("spec.sources[1].git"))
			g.Expect(stalled.Message).To(ContainSubstring("authentication required"))
			g.Expect(stalled.Message).NotTo(ContainSubstring("private-value"))
			for _, st := range env.Status.Sources {
				if st.Name == "app" {
					g.Expect(st.Digest).To(BeEmpty(), "B learned the digest of A's content")
				}
			}
		})
	}
	g.Consistently(func() bool {
		return apierrors.IsNotFound(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: nsB, Name: "private-settings"}, &corev1.ConfigMap{}))
	}, "500ms").Should(BeTrue(), "tenant B deployed tenant A's private content")

	// A's entry is in the store until A is deleted; then nobody uses it.
	entries := func() []string {
		names, _ := filepath.Glob(filepath.Join(operatortest.Reconciler.Sources.(*source.Resolver).Fetcher.Root, "git-"+commit+"-*"))
		return names
	}
	g.Expect(entries()).To(HaveLen(1))
	g.Expect(operatortest.Admin.Delete(ctx, a)).To(Succeed())
	operatortest.ExpectEnvGone(t, nsA, "tenant-a")
	g.Eventually(entries, operatortest.Timeout).Should(BeEmpty(), "a deleted environment's source stays in the store")
}

package build_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// TestPinnedSourceSecretNotMountedUnlessReadable (issue 31, low): a source
// pinned by digest is never fetched with its Secret as the environment's
// ServiceAccount, yet its builder pods mounted the Secret by name — and
// the kubelet mounts any Secret of the namespace. An environment acting
// as a ServiceAccount that may create Jobs but not read Secrets names the
// namespace admin's Secret: no builder Job mounts it, and the environment
// is Stalled naming the Secret and the source.
func TestPinnedSourceSecretNotMountedUnlessReadable(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, sourceDigest := apiNamespace(t)
	admin := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "namespace-admin"}, StringData: map[string]string{"token": "not for builders"}}
	g.Expect(operatortest.Admin.Create(ctx, admin)).To(Succeed())
	// A builder identity with every right the build needs but Secrets.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "builder"}}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "builder"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods", "pods/log", "persistentvolumeclaims", "configmaps", "serviceaccounts", "events"}, Verbs: []string{"*"}},
		{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"*"}},
	}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "builder"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "builder"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "builder"}}}
	for _, obj := range []client.Object{sa, role, binding} {
		g.Expect(operatortest.Admin.Create(ctx, obj)).To(Succeed())
	}

	env := amd64APIEnv(ns)
	env.Spec.ServiceAccountName = "builder"
	oci := env.Spec.Sources[0].OCI
	oci.Tag, oci.Digest = "", sourceDigest.String()
	oci.SecretRef = &v1alpha1.LocalObjectReference{Name: "namespace-admin"}
	g.Expect(operatortest.Admin.Create(ctx, env)).To(Succeed())

	operatortest.WaitForStalled(t, client.ObjectKeyFromObject(env), v1alpha1.ReasonBuildFailed,
		"image api: the secretRef of source app: Secret "+ns+"/namespace-admin is not readable by the environment's ServiceAccount, so it is not mounted")
	g.Expect(operatortest.BuilderJobs(g, ns)).To(BeEmpty(), "a builder Job was made, mounting the namespace admin's Secret")
}

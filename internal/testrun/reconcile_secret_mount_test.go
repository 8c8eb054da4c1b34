package testrun_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/builder"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// TestPinnedSourceSecretNotMountedInTestPods (issue 31, low): a suite
// checking out a source pinned by digest would have its test pod mount
// the source's Secret by name, which the operator never read as the
// environment's ServiceAccount. Acting as one that may create Jobs but
// not read Secrets, the run ends in Error naming the Secret and no test
// Job is made.
func TestPinnedSourceSecretNotMountedInTestPods(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := operatortest.Namespace(t)
	digest := operatortest.AppFiles(t, ns, map[string]string{"README": "pinned"})
	g.Expect(operatortest.Admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "namespace-admin"},
		StringData: map[string]string{"token": "not for test pods"}})).To(Succeed())
	for _, obj := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tester"}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tester"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods", "pods/log", "persistentvolumeclaims", "configmaps", "events"}, Verbs: []string{"*"}},
			{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"*"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tester"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "tester"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "tester"}}},
	} {
		g.Expect(operatortest.Admin.Create(ctx, obj)).To(Succeed())
	}
	src := builder.OCISource(builder.AppSource, operatortest.Registry.Host+"/"+ns+"/src", "")
	src.OCI.Digest = digest.String()
	src.OCI.SecretRef = &v1alpha1.LocalObjectReference{Name: "namespace-admin"}
	suite := builder.Suite("unit").Obj()
	suite.Source = builder.AppSource
	env := operatortest.Env(ns, "tests").ServiceAccount("tester").Source(src).Tests(suite).Create(t, operatortest.Admin)

	operatortest.Annotate(t, env, v1alpha1.TriggerAnnotation, "unit")
	_, run := operatortest.ExpectRun(t, env, "unit", 1, v1alpha1.ResultError)
	g.Expect(run.Message).To(ContainSubstring("Secret " + ns + "/namespace-admin is not readable by the environment's ServiceAccount, so it is not mounted"))
	g.Expect(operatortest.TestJobNames(g, ns)).To(BeEmpty(), "a test Job was made, mounting the namespace admin's Secret")
}

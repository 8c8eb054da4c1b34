package operatortest

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Allow grants the ServiceAccount ns/sa rules in ns.
func Allow(t testing.TB, ns, sa string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(Admin.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa + "-rights"}, Rules: rules})).To(Succeed())
	g.Expect(Admin.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa + "-rights"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: sa + "-rights"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}}})).To(Succeed())
}

// AllowCRDs lets the ServiceAccount ns/sa manage CRDs, which a chart
// shipping one needs.
func AllowCRDs(t testing.TB, ns, sa string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	name := "crds-" + ns
	g.Expect(Admin.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"apiextensions.k8s.io"},
			Resources: []string{"customresourcedefinitions"}, Verbs: []string{"*"}}}})).To(Succeed())
	g.Expect(Admin.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}}})).To(Succeed())
}

package operatortest

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/builder"
)

// DeployDirEnv pushes files as builder.AppSource to ns, where it makes the real
// deploy engine run and the ServiceAccount Deployer, and returns
// DeployDirSpec(ns, "jobs").
func DeployDirEnv(t testing.TB, ns string, files map[string]string) *v1alpha1.DevEnvironment {
	t.Helper()
	UseDeployEngine(ns)
	CreateDeployer(t, ns, Deployer)
	AppFiles(t, ns, files)
	return DeployDirSpec(ns, "jobs")
}

// DeployDirSpec is an environment acting as Deployer with one component,
// "init", applying the manifests under deploy/ of AppSource.
func DeployDirSpec(ns, name string) *v1alpha1.DevEnvironment {
	return Env(ns, name).ServiceAccount(Deployer).AppSource().Components(builder.Component("init", builder.Manifests("deploy"))).Obj()
}

// ClusterRoleManifest is a ClusterRole without rules, as YAML.
func ClusterRoleManifest(name string) string {
	return fmt.Sprintf("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: %s}\nrules: []\n", name)
}

// ConfigMapManifest is a ConfigMap with one key, as YAML.
func ConfigMapManifest(name string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s}\ndata: {a: b}\n", name)
}

// GrantClusterRoles lets ns's Deployer manage ClusterRoles, through the
// ClusterRole and binding it returns.
func GrantClusterRoles(t testing.TB, ns string) (*rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	grant := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "grant-" + ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles"}, Verbs: []string{"*"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "grant-" + ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: grant.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: Deployer}}}
	g.Expect(Admin.Create(ctx, grant)).To(Succeed())
	g.Expect(Admin.Create(ctx, binding)).To(Succeed())
	return grant, binding
}

// ReleaseSecrets counts the Helm storage Secrets of a release.
func ReleaseSecrets(t testing.TB, ns, release string) int {
	t.Helper()
	list := &corev1.SecretList{}
	NewWithT(t).Expect(Admin.List(context.Background(), list, client.InNamespace(ns),
		client.MatchingLabels{"owner": "helm", "name": release})).To(Succeed())
	return len(list.Items)
}

// EndJob writes the status the job controller would write when the Job's
// pod ended (envtest runs no controllers).
func EndJob(t testing.TB, ns, name string, succeeded bool) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		j := &batchv1.Job{}
		if err := Admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, j); err != nil {
			return err
		}
		start := metav1.NewTime(time.Now().Add(-time.Minute))
		now := metav1.Now()
		j.Status = batchv1.JobStatus{StartTime: &start}
		if succeeded {
			j.Status.CompletionTime, j.Status.Succeeded = &now, 1
			j.Status.Conditions = []batchv1.JobCondition{
				{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now}}
		} else {
			j.Status.Failed = 1
			j.Status.Conditions = []batchv1.JobCondition{
				{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: now},
				{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit", LastTransitionTime: now}}
		}
		return Admin.Status().Update(context.Background(), j)
	}, Timeout).Should(Succeed())
}

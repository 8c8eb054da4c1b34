package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

// OperatorNamespace and OperatorServiceAccount are where the chart installs
// the manager in the tests.
const (
	OperatorNamespace      = "devloop-system"
	OperatorServiceAccount = "devloop"
)

// OperatorUserName is the user name the API server sees for the operator:
// its ServiceAccount's.
func OperatorUserName() string {
	return "system:serviceaccount:" + OperatorNamespace + ":" + OperatorServiceAccount
}

// ManagerRole is the chart's ClusterRole for the manager
// (charts/devloop/files/manager-role.yaml, the +kubebuilder:rbac markers'
// output), so a test's operator has exactly the rights an installed one
// has.
func ManagerRole() (*rbacv1.ClusterRole, error) {
	data, err := os.ReadFile(filepath.Join(RepoRoot(), "charts", "devloop", "files", "manager-role.yaml"))
	if err != nil {
		return nil, err
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(trimDocumentStart(data), role); err != nil {
		return nil, fmt.Errorf("reading the chart's manager role: %w", err)
	}
	if len(role.Rules) == 0 {
		return nil, fmt.Errorf("the chart's manager role has no rules")
	}
	return role, nil
}

// OperatorConfig is Operator's connection.
func OperatorConfig(ctx context.Context, env *envtest.Environment, admin client.Client) (*rest.Config, error) {
	user, err := Operator(ctx, env, admin)
	if err != nil {
		return nil, err
	}
	return user.Config(), nil
}

// Operator binds the chart's manager ClusterRole to the operator's
// ServiceAccount user and provisions that user (a client certificate; no
// admin group), for a connection or a kubeconfig. admin creates the
// bindings.
func Operator(ctx context.Context, env *envtest.Environment, admin client.Client) (*envtest.AuthenticatedUser, error) {
	role, err := ManagerRole()
	if err != nil {
		return nil, err
	}
	role.ObjectMeta = metav1.ObjectMeta{Name: "devloop-manager-role"}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "devloop-manager-rolebinding"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: OperatorNamespace, Name: OperatorServiceAccount}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := admin.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("granting the operator the chart's role: %w", err)
		}
	}
	user, err := env.AddUser(envtest.User{
		Name:   OperatorUserName(),
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + OperatorNamespace, "system:authenticated"},
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("provisioning the operator's user: %w", err)
	}
	return user, nil
}

// trimDocumentStart drops a leading "---" line, which controller-gen
// writes and sigs.k8s.io/yaml does not accept as one document.
func trimDocumentStart(data []byte) []byte {
	if len(data) >= 4 && string(data[:4]) == "---\n" {
		return data[4:]
	}
	return data
}

package olm

import (
	"bytes"
	"fmt"
	"path/filepath"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Installer names: OLM v1's ClusterExtension "devloop" installs the bundle
// into InstallNamespace as the ServiceAccount InstallerServiceAccount.
const (
	ExtensionName           = "devloop"
	InstallNamespace        = "devloop-system"
	InstallerServiceAccount = "devloop-installer"
)

var crud = []string{"create", "delete", "get", "list", "patch", "update", "watch"}

// InstallerRBAC is config/olm/installer-rbac.yaml: what the ServiceAccount
// a ClusterExtension names may do, derived from the bundle as OLM v1's
// "derive the installer ServiceAccount" guide says:
//   - set finalizers on its ClusterExtension (ownerReferences with
//     blockOwnerDeletion);
//   - manage the CRD, by name;
//   - manage ClusterRoles and ClusterRoleBindings (OLM names those of the
//     CSV's clusterPermissions itself, so no resourceNames), and Roles,
//     RoleBindings, the Deployment, ServiceAccount and Service in the
//     install namespace;
//   - hold every right the bundle grants (the manager's rules, its leader
//     election rules, the aggregated editor and viewer rules): Kubernetes
//     refuses to let anyone grant rights they lack, and these are narrower
//     than the escalate and bind verbs. Cluster-wide, the leader election
//     rules too: devloop installs in AllNamespaces mode, where OLM v1 turns
//     the CSV's namespaced permissions into a ClusterRole, adding get, list
//     and watch on namespaces (the end-to-end suite's real OLM refused the
//     install without them);
//   - list and watch, cluster-wide, every kind the bundle installs: OLM
//     v1 watches what it installed, through the installer's identity and
//     in all namespaces, and reports the ClusterExtension Progressing
//     with Retrying ("failed to list serviceaccounts") until it can.
func InstallerRBAC(root string) ([]byte, error) {
	objs, err := kustomizeBuild(filepath.Join(root, "config", "default"))
	if err != nil {
		return nil, err
	}
	in, err := sortInstall(objs)
	if err != nil {
		return nil, err
	}
	granted := append([]rbacv1.PolicyRule(nil), in.clusterRules...)
	granted = append(granted, in.rules...)
	granted = append(granted, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch"}})
	for _, u := range in.extra {
		if u.GetKind() != "ClusterRole" {
			continue
		}
		rules, _, _ := unstructuredRules(u.Object)
		granted = append(granted, rules...)
	}

	clusterRole := rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: InstallerServiceAccount},
		Rules: append([]rbacv1.PolicyRule{
			{APIGroups: []string{"olm.operatorframework.io"}, Resources: []string{"clusterextensions/finalizers"}, Verbs: []string{"update"}, ResourceNames: []string{ExtensionName}},
			{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"create", "list", "watch"}},
			{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"delete", "get", "patch", "update"}, ResourceNames: []string{"devenvironments.devloop.dev"}},
			{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles", "clusterrolebindings"}, Verbs: crud},
			{APIGroups: []string{""}, Resources: []string{"serviceaccounts", "services"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"list", "watch"}},
		}, granted...),
	}
	role := rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
		ObjectMeta: metav1.ObjectMeta{Name: InstallerServiceAccount, Namespace: InstallNamespace},
		Rules: append([]rbacv1.PolicyRule{
			{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: crud},
			{APIGroups: []string{""}, Resources: []string{"serviceaccounts", "services"}, Verbs: crud},
			{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"roles", "rolebindings"}, Verbs: crud},
		}, in.rules...),
	}
	subjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: InstallerServiceAccount, Namespace: InstallNamespace}}
	docs := []any{
		map[string]any{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": map[string]any{"name": InstallerServiceAccount, "namespace": InstallNamespace}},
		clusterRole,
		rbacv1.ClusterRoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: InstallerServiceAccount},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: InstallerServiceAccount},
			Subjects:   subjects,
		},
		role,
		rbacv1.RoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: InstallerServiceAccount, Namespace: InstallNamespace},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: InstallerServiceAccount},
			Subjects:   subjects,
		},
	}
	var out bytes.Buffer
	out.WriteString("# Generated by `make bundle` (internal/olm.InstallerRBAC) from config/default: do not edit.\n")
	out.WriteString("# The ServiceAccount OLM v1 installs and upgrades devloop as (clusterextension.yaml).\n")
	for _, d := range docs {
		data, err := toYAML(d)
		if err != nil {
			return nil, err
		}
		out.WriteString("---\n")
		out.Write(data)
	}
	return out.Bytes(), nil
}

func unstructuredRules(obj map[string]any) ([]rbacv1.PolicyRule, bool, error) {
	raw, ok := obj["rules"].([]any)
	if !ok {
		return nil, false, nil
	}
	var rules []rbacv1.PolicyRule
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			return nil, false, fmt.Errorf("rule %v is not an object", r)
		}
		rules = append(rules, rbacv1.PolicyRule{
			APIGroups: stringList(m["apiGroups"]), Resources: stringList(m["resources"]),
			Verbs: stringList(m["verbs"]), ResourceNames: stringList(m["resourceNames"]),
			// The metrics-reader role's rule is on a URL, not a resource.
			NonResourceURLs: stringList(m["nonResourceURLs"]),
		})
	}
	return rules, true, nil
}

func stringList(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, e := range list {
		s, _ := e.(string)
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

package install

import (
	"path/filepath"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/devloop-dev/devloop/internal/teamcache"
	"github.com/devloop-dev/devloop/internal/testenv"
)

// Issue 44: reading an environment's build cache (spec.cache.readFrom)
// is the verb readcache, and the built-in view role must not carry it
// (it did as get). The roles aggregated into edit and admin carry it:
// whoever grants it needs it themselves (RBAC's escalation check), and
// an editor may change the environment's builds anyway. Chart and
// kustomize alike.
func TestAggregatedRolesGrantReadCacheToEditorsOnly(t *testing.T) {
	rendered := renderChart(t, nil)
	roles := map[string]rbacv1.ClusterRole{
		"chart viewer":     clusterRoleOf(t, find(t, rendered, "ClusterRole", "devloop-viewer").Object),
		"chart editor":     clusterRoleOf(t, find(t, rendered, "ClusterRole", "devloop-editor").Object),
		"kustomize viewer": readClusterRole(t, filepath.Join(testenv.RepoRoot(), "config", "rbac", "viewer_role.yaml")),
		"kustomize editor": readClusterRole(t, filepath.Join(testenv.RepoRoot(), "config", "rbac", "editor_role.yaml")),
	}
	for name, role := range roles {
		aggregatedTo := "view"
		if role.Labels["rbac.authorization.k8s.io/aggregate-to-edit"] == "true" {
			aggregatedTo = "edit"
		}
		grants := grantsVerb(role, teamcache.VerbReadCache)
		switch {
		case aggregatedTo == "view" && grants:
			t.Errorf("%s role (aggregated into view) grants %s on devenvironments", name, teamcache.VerbReadCache)
		case aggregatedTo == "edit" && !grants:
			t.Errorf("%s role (aggregated into edit and admin) does not grant %s on devenvironments", name, teamcache.VerbReadCache)
		}
		if aggregatedTo == "view" && role.Labels["rbac.authorization.k8s.io/aggregate-to-view"] != "true" {
			t.Errorf("%s role is aggregated into neither view nor edit", name)
		}
	}
}

func clusterRoleOf(t *testing.T, obj map[string]any) rbacv1.ClusterRole {
	t.Helper()
	var role rbacv1.ClusterRole
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &role); err != nil {
		t.Fatal(err)
	}
	return role
}

func grantsVerb(role rbacv1.ClusterRole, verb string) bool {
	for _, r := range role.Rules {
		if slices.Contains(r.APIGroups, "devloop.dev") && slices.Contains(r.Resources, "devenvironments") &&
			(slices.Contains(r.Verbs, verb) || slices.Contains(r.Verbs, "*")) {
			return true
		}
	}
	return false
}

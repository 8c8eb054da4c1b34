package teamcache

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/devloop-dev/devloop/internal/testenv"
)

// Issue 44: readFrom was granted by get on a DevEnvironment, which the
// chart aggregates into the built-in view role, so any view grant opened
// a namespace's build cache. B's ServiceAccount with view in A's
// namespace (the built-in role and what the chart aggregates into it)
// reads nothing of A's cache; the grant docs/team-cache.md shows (the
// verb readcache on A's environment) lets it.
func TestViewDoesNotGrantReadFrom(t *testing.T) {
	ctx := context.Background()
	svc, srv := newService(t)
	a := newTenantEnv(t, "readcache-a-", srv)
	b := newTenantEnv(t, "readcache-b-", srv, sourceOf(a))
	bindView(t, a.env.Namespace, b)

	shared := newEntry("compile k8s.io/api/core/v1", "compiled by A")
	put(t, a.client, shared)
	if body, from := get(t, b.client, shared); body != "" {
		t.Fatalf("B read %q from %s with view on A's namespace only", body, from)
	}
	_, err := CheckReadFrom(ctx, svc.Reviewer, b.env, "builder")
	var refused *ReadRefusedError
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), "spec.cache.readFrom[0]") || !strings.Contains(err.Error(), VerbReadCache) {
		t.Fatalf("CheckReadFrom with view only: %v, want a refusal naming spec.cache.readFrom[0] and %s", err, VerbReadCache)
	}
	t.Logf("refused: %v", err)

	grantReadCache(t, a, b)
	// A new token: who a token is, and what it may read, is remembered
	// for callerTTL.
	fresh := &Client{URL: srv.URL, TokenFile: podToken(t, b.pod, DefaultAudience)}
	if body, from := get(t, fresh, shared); body != "compiled by A" || from != a.env.Namespace+"/dev" {
		t.Fatalf("B read %q from %q with readcache on A, want A's entry", body, from)
	}
	if _, err := CheckReadFrom(ctx, svc.Reviewer, b.env, "builder"); err != nil {
		t.Fatalf("CheckReadFrom with readcache: %v", err)
	}
}

// bindView gives reader's ServiceAccount view in namespace ns: the
// built-in ClusterRole and the devloop viewer role aggregated into it
// (envtest runs no aggregation controller, so it is bound as well).
func bindView(t *testing.T, ns string, reader tenantEnv) {
	t.Helper()
	ctx := context.Background()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", "viewer_role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var viewer rbacv1.ClusterRole
	if err := yaml.Unmarshal(data, &viewer); err != nil {
		t.Fatal(err)
	}
	if viewer.Labels["rbac.authorization.k8s.io/aggregate-to-view"] != "true" {
		t.Fatalf("config/rbac/viewer_role.yaml is not aggregated into view")
	}
	viewer.ObjectMeta = metav1.ObjectMeta{GenerateName: "devloop-viewer-"}
	if err := admin.Create(ctx, &viewer); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), &viewer) })
	for _, role := range []string{"view", viewer.Name} {
		binding := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "view-"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: reader.env.Namespace, Name: reader.env.Spec.ServiceAccountName}},
		}
		if err := admin.Create(ctx, binding); err != nil {
			t.Fatal(err)
		}
	}
}

package cli

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/devloop-dev/devloop/internal/registryauth/registryauthtest"
	"github.com/devloop-dev/devloop/internal/testenv"
)

// podCreator makes the ServiceAccount sa in ns, allowed to create pods
// there (what the bundled registry asks of whoever pushes to ns/...).
func podCreator(t *testing.T, ns, sa string) {
	t.Helper()
	ctx := context.Background()
	if err := k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}}); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa + "-pods"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create"}}}}); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa + "-pods"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: sa + "-pods"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}}}); err != nil {
		t.Fatal(err)
	}
}

// `kubectl devloop push` to the chart's bundled registry, with no docker
// credentials for it: the plugin requests, as the user, a registry-only
// token for the environment's ServiceAccount, which may push to its own
// namespace's repository; an environment of another namespace naming that
// repository cannot push there.
func TestPushToTheBundledRegistry(t *testing.T) {
	cs, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		t.Fatal(err)
	}
	host := registryauthtest.Start(t, cs)
	nsA, nsB := testenv.Namespace(t, k8s, "bundled-a-"), testenv.Namespace(t, k8s, "bundled-b-")
	podCreator(t, nsA, "deployer")
	podCreator(t, nsB, "deployer")

	createEnv(t, nsA, "app", pushedSpec(host, nsA+"/src"))
	r := plugin(t, "push", appTree(t, "a"), "--env", "app", "--source", "app", "-n", nsA, "--no-follow")
	if r.code != 0 || !strings.Contains(r.out, "pushed "+host+"/"+nsA+"/src:dev") {
		t.Fatalf("team-a's push to its own repository:\n%s", r)
	}

	// team-b names team-a's repository as its source.
	createEnv(t, nsB, "app", pushedSpec(host, nsA+"/src"))
	r = plugin(t, "push", appTree(t, "b"), "--env", "app", "--source", "app", "-n", nsB, "--no-follow")
	if r.code == 0 || !strings.Contains(strings.ToLower(r.err), "unauthorized") {
		t.Fatalf("team-b's push into team-a's repository: want refused by the registry, got\n%s", r)
	}
	t.Logf("team-b refused: %s", strings.TrimSpace(r.err))
}

//go:build e2e

package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	. "github.com/devloop-dev/devloop/test/e2e/fixture"
)

// secondEnvironmentReadsTheTreesCache is issue 34's item 2, on the tree
// TestOneCompilePerTree compiled cold (so the suite compiles the tree
// once): environment B of the same project, in another namespace, names
// the tree's environment A in spec.cache.readFrom, may readcache A, and builds
// the largest binary of the same tree. Both Ready times are printed, with
// the load, for docs/performance.md; B must be Ready within a bound wide
// enough for a cold compile on a loaded machine (the figure is the point).
func secondEnvironmentReadsTheTreesCache(t *testing.T, envA *v1alpha1.DevEnvironment, files Files, goproxy string, cold time.Duration) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	c := need(t)
	nsA := envA.Namespace
	nsB := namespace(t, "e2e-tcache-b")
	envB := newEnv(nsB, "vcsim").PushingImages().Components(
		Component("vcsim", Images(vcsimImage("controller-manager", goproxy)))).Build()
	envB.Spec.Cache = &v1alpha1.EnvironmentCache{ReadFrom: []v1alpha1.CacheSource{{Namespace: nsA, Name: envA.Name}}}
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "read-vcsim"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"devenvironments"},
			ResourceNames: []string{envA.Name}, Verbs: []string{"readcache"}}},
	}
	g.Expect(c.Client.Create(ctx, role)).To(Succeed())
	g.Expect(c.Client.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "read-vcsim"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: nsB, Name: "deployer"}},
	})).To(Succeed())

	pushOnly(t, envB, sourceDir(t, files))
	loadBefore, _ := os.ReadFile("/proc/loadavg")
	start := time.Now()
	g.Expect(c.Client.Create(ctx, envB)).To(Succeed())
	done := waitEnv(t, client.ObjectKeyFromObject(envB), 6*time.Minute, false, func(g Gomega, env *v1alpha1.DevEnvironment) {
		readyNow(g, env)
		g.Expect(imageOf(env, "controller-manager").Digest).NotTo(BeEmpty())
	})
	warm := time.Since(start)
	loadAfter, _ := os.ReadFile("/proc/loadavg")
	t.Logf("team cache: %s/%s (three images) cold Ready %s; %s/%s reading its cache Ready %s, job %s; load before %s, after %s",
		nsA, envA.Name, cold.Round(100*time.Millisecond), nsB, envB.Name, warm.Round(100*time.Millisecond),
		imageOf(done, "controller-manager").Build.Job, strings.TrimSpace(string(loadBefore)), strings.TrimSpace(string(loadAfter)))
}

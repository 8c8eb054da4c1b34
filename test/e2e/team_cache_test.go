//go:build e2e

package e2e

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
	. "github.com/devloop-dev/devloop/test/e2e/fixture"
)

// vcsimGoProxy serves the host's module cache, filled with the vcsim
// fixture's modules (client-go and its dependencies), as a GOPROXY on the
// node's address: builder pods have no other way to the modules. (A copy
// of delveGoProxy's server; the lead dedupes it with the shared-build
// case's.)
func vcsimGoProxy(t *testing.T, dir string) string {
	t.Helper()
	download := exec.Command("go", "mod", "download")
	download.Dir = dir
	download.Env = append(os.Environ(), "GOFLAGS=", "GOTOOLCHAIN=local", "GONOSUMDB=k8s.io")
	if out, err := download.CombinedOutput(); err != nil {
		t.Fatalf("go mod download in %s on the host: %v\n%s", dir, err, out)
	}
	modcache, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(nodeAddress, "0"))
	if err != nil {
		t.Fatalf("listening on the node's address for the Go proxy: %v", err)
	}
	srv := &http.Server{Handler: http.FileServer(http.Dir(filepath.Join(strings.TrimSpace(string(modcache)), "cache", "download"))),
		ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return "http://" + l.Addr().String()
}

// TestTeamCacheSecondEnvironment (issue 34, item 2): environment A in one
// namespace builds vcsim's controller-manager (client-go informers) cold;
// environment B of the same project in another namespace names A in
// spec.cache.readFrom, may readcache A, and builds the same tree. Both Ready
// times are printed, with the load, for docs/performance.md. A's cold
// compile of client-go took more than 6 minutes at load 8-12 on two
// cores: run it alone, with `-timeout 30m`, on a quiet machine.
func TestTeamCacheSecondEnvironment(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := need(t)
	fixture := filepath.Join(testenv.RepoRoot(), "test", "e2e", "testdata", "vcsim")
	goproxy := vcsimGoProxy(t, fixture)

	envFor := func(ns string) *v1alpha1.DevEnvironment {
		return newEnv(ns, "vcsim").SourceRepository("vcsim-src").PushingImages().Components(
			Component("controller", Manifests(), Images(Image("controller", Base(busybox),
				Run(GoBuild(goImage, []string{"go", "build", "-o", "out/controller-manager", "./cmd/controller-manager"},
					GoPath, v1alpha1.EnvVar{Name: "GOPROXY", Value: goproxy}, v1alpha1.EnvVar{Name: "GOSUMDB", Value: "off"})),
				Program("out/controller-manager", "/controller-manager"))))).Build()
	}
	build := func(env *v1alpha1.DevEnvironment, within time.Duration) time.Duration {
		pushDir(t, env, copyDir(t, fixture))
		start := time.Now()
		g.Expect(c.Client.Create(ctx, env)).To(Succeed())
		done := waitEnv(t, client.ObjectKeyFromObject(env), within, false, func(g Gomega, env *v1alpha1.DevEnvironment) {
			readyNow(g, env)
			g.Expect(imageOf(env, "controller").Digest).NotTo(BeEmpty())
		})
		took := time.Since(start)
		t.Logf("%s/%s Ready in %s, job %s", env.Namespace, env.Name, took.Round(100*time.Millisecond), imageOf(done, "controller").Build.Job)
		return took
	}

	nsA := namespace(t, "e2e-tcache-a")
	envA := envFor(nsA)
	loadBefore, _ := os.ReadFile("/proc/loadavg")
	cold := build(envA, 20*time.Minute)

	nsB := namespace(t, "e2e-tcache-b")
	envB := envFor(nsB)
	envB.Spec.Cache = &v1alpha1.EnvironmentCache{ReadFrom: []v1alpha1.CacheSource{{Namespace: nsA, Name: envA.Name}}}
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "read-vcsim"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"devenvironments"},
			ResourceNames: []string{envA.Name}, Verbs: []string{"readcache"}}}, // teamcache.VerbReadCache
	}
	g.Expect(c.Client.Create(ctx, role)).To(Succeed())
	g.Expect(c.Client.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "read-vcsim"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: nsB, Name: "deployer"}},
	})).To(Succeed())
	warm := build(envB, 6*time.Minute)
	loadAfter, _ := os.ReadFile("/proc/loadavg")
	t.Logf("cold Ready %s; reading A's cache %s; %.1fx; load before %s, after %s",
		cold.Round(100*time.Millisecond), warm.Round(100*time.Millisecond), cold.Seconds()/warm.Seconds(),
		strings.TrimSpace(string(loadBefore)), strings.TrimSpace(string(loadAfter)))
}

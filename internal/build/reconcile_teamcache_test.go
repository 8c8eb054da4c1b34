package build_test

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/internal/teamcache"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// expectTeamCachePod checks a builder pod's spec reaches the team cache
// as its environment: it runs as the environment's ServiceAccount with
// no API token, the author's container has the helper as GOCACHEPROG and
// a token for the cache's audience only.
func expectTeamCachePod(g Gomega, spec corev1.PodSpec, buildContainer, sa string) {
	g.Expect(spec.ServiceAccountName).To(Equal(sa))
	g.Expect(spec.AutomountServiceAccountToken).NotTo(BeNil())
	g.Expect(*spec.AutomountServiceAccountToken).To(BeFalse())
	var tokenVolume string
	for _, v := range spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, p := range v.Projected.Sources {
			if p.ServiceAccountToken != nil {
				g.Expect(p.ServiceAccountToken.Audience).To(Equal(teamcache.DefaultAudience))
				tokenVolume = v.Name
			}
		}
	}
	g.Expect(tokenVolume).NotTo(BeEmpty(), "a projected token for the build cache")
	for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
		mounted := false
		for _, m := range c.VolumeMounts {
			mounted = mounted || m.Name == tokenVolume
		}
		if c.Name != buildContainer {
			g.Expect(mounted).To(BeFalse(), "container %s mounts the build cache token", c.Name)
			continue
		}
		g.Expect(mounted).To(BeTrue(), "the build container mounts the build cache token")
		var prog string
		for _, e := range c.Env {
			if e.Name == "GOCACHEPROG" {
				prog = e.Value
			}
		}
		g.Expect(prog).To(HavePrefix(build.WarmHelper + " helper gocacheprog "))
		g.Expect(prog).To(ContainSubstring("--url " + operatortest.TeamCacheURL))
	}
}

// Builder Jobs and warm builders reach the team cache as their
// environment.
func TestBuilderPodsUseTheTeamCacheAsTheEnvironment(t *testing.T) {
	g := NewWithT(t)
	ns, _ := apiNamespace(t)
	operatortest.CreateEnv(t, amd64APIEnv(ns))
	g.Eventually(func(g Gomega) {
		jobs := operatortest.BuilderJobs(g, ns)
		g.Expect(jobs).To(HaveLen(1))
		var spec corev1.PodSpec
		for _, job := range jobs {
			spec = job.Spec.Template.Spec
		}
		expectTeamCachePod(g, spec, build.ContainerBuild, operatortest.Deployer)
		// The helper binary GOCACHEPROG names is installed before the build.
		var names []string
		for _, c := range spec.InitContainers {
			names = append(names, c.Name)
		}
		g.Expect(names).To(Equal([]string{"fetch", build.ContainerInstall, build.ContainerBuild}))
	}, operatortest.Timeout).Should(Succeed())

	warmNS, _ := apiNamespace(t)
	operatortest.CreateEnv(t, warmAPIEnv(warmNS))
	g.Eventually(func(g Gomega) {
		var list corev1.PodList
		g.Expect(operatortest.Admin.List(context.Background(), &list, client.InNamespace(warmNS),
			client.MatchingLabels{v1alpha1.LabelRole: v1alpha1.RoleWarmBuild})).To(Succeed())
		g.Expect(list.Items).To(HaveLen(1))
		expectTeamCachePod(g, list.Items[0].Spec, build.ContainerWarm, operatortest.Deployer)
	}, operatortest.Timeout).Should(Succeed())
}

// An environment naming another's cache in spec.cache.readFrom without
// the verb readcache on that DevEnvironment is Stalled naming the entry,
// and builds nothing; get, list and watch (what the chart aggregates into
// the built-in view role) do not open the cache (issue 44); once
// readcache is granted, it builds.
func TestReadFromWithoutReadCacheStalls(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	nsA, _ := apiNamespace(t)
	operatortest.CreateEnv(t, amd64APIEnv(nsA))

	nsB, _ := apiNamespace(t)
	envB := amd64APIEnv(nsB)
	envB.Spec.Cache = &v1alpha1.EnvironmentCache{ReadFrom: []v1alpha1.CacheSource{{Namespace: nsA, Name: "api"}}}
	key := operatortest.CreateEnv(t, envB)
	stalled := operatortest.WaitForStalled(t, key, v1alpha1.ReasonForbidden, "spec.cache.readFrom[0]", nsA+"/api", teamcache.VerbReadCache)
	t.Logf("Stalled: %s", operatortest.EnvCondition(stalled, v1alpha1.ConditionStalled).Message)
	operatortest.ExpectKstatus(t, stalled, "Failed")
	g.Expect(operatortest.BuilderJobs(g, nsB)).To(BeEmpty(), "a refused environment builds nothing")

	grant := func(name string, verbs ...string) {
		role := &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: name},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"devenvironments"},
				ResourceNames: []string{"api"}, Verbs: verbs}},
		}
		g.Expect(operatortest.Admin.Create(ctx, role)).To(Succeed())
		g.Expect(operatortest.Admin.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: nsB, Name: operatortest.Deployer}},
		})).To(Succeed())
	}
	// What view carries: a reconcile after the grant still stalls.
	grant("view-api", "get", "list", "watch")
	asked := operatortest.RequestReconcile(t, stalled)
	still := operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.LastHandledReconcileAt).To(Equal(asked))
	})
	c := operatortest.EnvCondition(still, v1alpha1.ConditionStalled)
	g.Expect(c).NotTo(BeNil(), "not stalled with get on A: %s", operatortest.ConditionsSummary(still))
	g.Expect(c.Message).To(ContainSubstring("spec.cache.readFrom[0]"))
	g.Expect(operatortest.BuilderJobs(g, nsB)).To(BeEmpty(), "an environment with view on A builds reading A's cache")

	// Grant B's deployer readcache on A's environment, by name.
	grant("read-api-cache", teamcache.VerbReadCache)
	operatortest.RequestReconcile(t, stalled)
	g.Eventually(func(g Gomega) {
		g.Expect(operatortest.BuilderJobs(g, nsB)).To(HaveLen(1))
	}, operatortest.Timeout).Should(Succeed())
	env := operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		c := operatortest.EnvCondition(env, v1alpha1.ConditionStalled)
		g.Expect(c == nil || !strings.Contains(c.Message, "readFrom")).To(BeTrue(), "still stalled: %s", operatortest.ConditionsSummary(env))
	})
	operatortest.ExpectKstatus(t, env, "InProgress")
}

package main

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
)

func TestShardFlags(t *testing.T) {
	g := NewWithT(t)
	o, err := parseFlags(nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.shard.selector).To(BeNil(), "no selector: every environment")
	g.Expect(o.shard.leaderElectionID).To(Equal(defaultLeaderElectionID))

	shard1, err := parseFlags([]string{"--watch-label-selector=sharding.devloop.dev/key=shard1"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(shard1.shard.selector.Matches(labels.Set{"sharding.devloop.dev/key": "shard1"})).To(BeTrue())
	g.Expect(shard1.shard.selector.Matches(labels.Set{})).To(BeFalse())
	rest, err := parseFlags([]string{"--watch-label-selector=!sharding.devloop.dev/key"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rest.shard.selector.Matches(labels.Set{})).To(BeTrue())
	g.Expect(rest.shard.selector.Matches(labels.Set{"sharding.devloop.dev/key": "shard1"})).To(BeFalse())

	// Each shard elects its leader on a lease of its own, the same for
	// every replica of the shard however its selector is spelled.
	ids := map[string]bool{defaultLeaderElectionID: true, shard1.shard.leaderElectionID: true, rest.shard.leaderElectionID: true}
	g.Expect(ids).To(HaveLen(3))
	a, _ := parseFlags([]string{"--watch-label-selector=team=a, tier in (x,y)"})
	b, _ := parseFlags([]string{"--watch-label-selector=tier in (y,x),team=a"})
	g.Expect(a.shard.leaderElectionID).To(Equal(b.shard.leaderElectionID))
	g.Expect(a.shard.leaderElectionID).To(MatchRegexp(`^devloop-manager-[0-9a-f]{10}\.devloop\.dev$`))

	named, err := parseFlags([]string{"--watch-label-selector=team=a", "--leader-election-id=team-a.devloop.dev"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(named.shard.leaderElectionID).To(Equal("team-a.devloop.dev"))

	_, err = parseFlags([]string{"--watch-label-selector=team==a=b"})
	g.Expect(err).To(MatchError(ContainSubstring("--watch-label-selector")))
	_, err = parseFlags([]string{"--leader-election-id=Not_A_Name"})
	g.Expect(err).To(MatchError(ContainSubstring("--leader-election-id")))
}

// TestShardsReconcileOnlyTheirEnvironments runs two operator instances
// over one API server, as the chart's shards do: shard1 with
// sharding.devloop.dev/key=shard1, the main one with
// !sharding.devloop.dev/key, each electing its leader. Each writes the
// status of its own environments only; an environment of a shard nobody
// runs is left alone; an environment relabelled out of shard1 is taken
// over by the main instance.
func TestShardsReconcileOnlyTheirEnvironments(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	admin, operator := apiServer(t)
	ns := testenv.Namespace(t, admin, "shards-")

	var shard1Writes, mainWrites statusWrites
	leaderArgs := []string{"--leader-elect", "--leader-election-namespace=" + testenv.OperatorNamespace}
	startManager(t, shard1Writes.connection(operator), append(leaderArgs, "--watch-label-selector="+shardKey+"=shard1")...)
	startManager(t, mainWrites.connection(operator), append(leaderArgs, "--watch-label-selector=!"+shardKey)...)

	envs := map[string]string{"in-shard1": "shard1", "in-main": "", "in-shard2": "shard2"}
	for name, shardName := range envs {
		env := &v1alpha1.DevEnvironment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if shardName != "" {
			env.Labels = map[string]string{shardKey: shardName}
		}
		g.Expect(admin.Create(ctx, env)).To(Succeed())
	}
	for _, name := range []string{"in-shard1", "in-main"} {
		expectReady(t, admin, ns, name)
	}
	g.Expect(shard1Writes.of(ns, "in-shard1")).NotTo(BeEmpty())
	g.Expect(mainWrites.of(ns, "in-main")).NotTo(BeEmpty())
	g.Expect(shard1Writes.of(ns, "in-main")).To(BeEmpty(), "shard1 wrote the main instance's environment")
	g.Expect(mainWrites.of(ns, "in-shard1")).To(BeEmpty(), "the main instance wrote shard1's environment")

	// Nobody runs shard2: its environment is not touched, not even
	// given the finalizer.
	g.Consistently(func(g Gomega) {
		env := &v1alpha1.DevEnvironment{}
		g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "in-shard2"}, env)).To(Succeed())
		g.Expect(env.Finalizers).To(BeEmpty())
		g.Expect(env.Status.Conditions).To(BeEmpty())
	}, "2s").Should(Succeed())
	g.Expect(shard1Writes.of(ns, "in-shard2")).To(BeEmpty())
	g.Expect(mainWrites.of(ns, "in-shard2")).To(BeEmpty())

	// Both elected a leader, each on its shard's lease.
	leases := &coordinationv1.LeaseList{}
	g.Expect(admin.List(ctx, leases, client.InNamespace(testenv.OperatorNamespace))).To(Succeed())
	var names []string
	for _, l := range leases.Items {
		names = append(names, l.Name)
	}
	g.Expect(names).To(ContainElements(
		shardLeaseName(labels.SelectorFromSet(labels.Set{shardKey: "shard1"})),
		shardLeaseName(mustParse(t, "!"+shardKey))))

	// Moved out of shard1: the main instance picks it up and handles a
	// reconcile request; shard1 does not.
	env := &v1alpha1.DevEnvironment{}
	g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "in-shard1"}, env)).To(Succeed())
	delete(env.Labels, shardKey)
	g.Expect(admin.Update(ctx, env)).To(Succeed())
	const token = "moved-to-main-1"
	g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(env), env)).To(Succeed())
	env.Annotations = map[string]string{v1alpha1.ReconcileRequestAnnotation: token}
	g.Expect(admin.Update(ctx, env)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(env), env)).To(Succeed())
		g.Expect(env.Status.LastHandledReconcileAt).To(Equal(token))
	}, waitFor).Should(Succeed())
	g.Expect(strings.Join(mainWrites.of(ns, "in-shard1"), "\n")).To(ContainSubstring(token), "the main instance handled the moved environment")
	g.Expect(strings.Join(shard1Writes.of(ns, "in-shard1"), "\n")).NotTo(ContainSubstring(token), "shard1 still reconciles an environment moved out of it")
}

const shardKey = "sharding.devloop.dev/key"

func mustParse(t *testing.T, s string) labels.Selector {
	t.Helper()
	sel, err := labels.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}

// expectReady waits for the environment to be Ready at its generation.
func expectReady(t *testing.T, admin client.Client, ns, name string) *v1alpha1.DevEnvironment {
	t.Helper()
	env := &v1alpha1.DevEnvironment{}
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, env)).To(Succeed())
		g.Expect(env.Status.ObservedGeneration).To(Equal(env.Generation))
		ready := meta.FindStatusCondition(env.Status.Conditions, v1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), "Ready: %s", ready.Message)
	}, waitFor).Should(Succeed())
	return env
}

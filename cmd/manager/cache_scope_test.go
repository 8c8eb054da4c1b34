package main

import (
	"context"
	"errors"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	devmetrics "github.com/devloop-dev/devloop/internal/metrics"
	"github.com/devloop-dev/devloop/internal/testenv"
)

// TestCacheHoldsOnlyWhatDevloopOwns starts the operator as main does and
// fills another namespace with 200 Jobs, 200 pods and 200 Secrets that
// are none of devloop's (among the Jobs, 20 a chart deployed for an
// environment: labelled with it, but no builder or test Job). The
// manager's cache holds none of them: of Jobs only devloop's builder and
// test Jobs, of pods only those running under the live update supervisor,
// and no informer at all for Secrets or ConfigMaps (a read of them from
// the cache fails rather than starting one), while an environment
// reconciles to Ready.
func TestCacheHoldsOnlyWhatDevloopOwns(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	admin, operator := apiServer(t)
	mgr := startManager(t, operator)

	unrelated := testenv.Namespace(t, admin, "unrelated-")
	for i := 0; i < 200; i++ {
		labels := map[string]string{"app": "someone-else"}
		if i < 20 {
			labels = map[string]string{v1alpha1.LabelEnvironment: "web", v1alpha1.LabelComponent: "migrations"}
		}
		g.Expect(admin.Create(ctx, unrelatedJob(unrelated, fmt.Sprintf("job-%d", i), labels))).To(Succeed())
		g.Expect(admin.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: unrelated, Name: fmt.Sprintf("pod-%d", i)},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}})).To(Succeed())
		g.Expect(admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: unrelated, Name: fmt.Sprintf("secret-%d", i)},
			StringData: map[string]string{"token": "not devloop's"}})).To(Succeed())
	}

	ns := testenv.Namespace(t, admin, "owned-")
	builder := unrelatedJob(ns, "api-builder", map[string]string{v1alpha1.LabelEnvironment: "api", v1alpha1.LabelRole: v1alpha1.RoleBuild})
	tests := unrelatedJob(ns, "api-unit-1", map[string]string{v1alpha1.LabelEnvironment: "api", v1alpha1.LabelRole: v1alpha1.RoleTest})
	g.Expect(admin.Create(ctx, builder)).To(Succeed())
	g.Expect(admin.Create(ctx, tests)).To(Succeed())
	g.Expect(admin.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-live",
		Labels: map[string]string{v1alpha1.LabelLiveUpdate: v1alpha1.LiveUpdateSupervised}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}})).To(Succeed())
	g.Expect(admin.Create(ctx, &v1alpha1.DevEnvironment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "api"}})).To(Succeed())
	expectReady(t, admin, ns, "api")

	cached := mgr.GetCache()
	g.Eventually(func(g Gomega) {
		jobs := &batchv1.JobList{}
		g.Expect(cached.List(ctx, jobs)).To(Succeed())
		var names []string
		for _, j := range jobs.Items {
			names = append(names, j.Namespace+"/"+j.Name)
			g.Expect(j.ManagedFields).To(BeEmpty(), "managed fields are not kept in the cache")
		}
		g.Expect(names).To(ConsistOf(ns+"/api-builder", ns+"/api-unit-1"))
	}, waitFor).Should(Succeed())
	all := &batchv1.JobList{}
	g.Expect(admin.List(ctx, all, client.InNamespace(unrelated))).To(Succeed())
	g.Expect(all.Items).To(HaveLen(200), "the API server has them all")

	g.Eventually(func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(cached.List(ctx, pods)).To(Succeed())
		var names []string
		for _, p := range pods.Items {
			names = append(names, p.Namespace+"/"+p.Name)
		}
		g.Expect(names).To(ConsistOf(ns + "/web-live"))
	}, waitFor).Should(Succeed())

	for _, list := range []client.ObjectList{&corev1.SecretList{}, &corev1.ConfigMapList{}} {
		err := cached.List(ctx, list, client.InNamespace(unrelated))
		var notCached *cache.ErrResourceNotCached
		g.Expect(errors.As(err, &notCached)).To(BeTrue(), "%T read from the cache: %v (an informer over every one in the cluster)", list, err)
	}

	// The manager's requests are counted (newManager wraps its config):
	// its informers' watches and the environment's status writes, served
	// to Prometheus.
	counted := func(verb string) float64 { return testutil.ToFloat64(devmetrics.APIRequests.WithLabelValues(verb)) }
	g.Expect(counted(devmetrics.VerbWatch)).To(BeNumerically(">", 0), "devloop_api_requests_total{verb=watch}")
	g.Expect(counted(devmetrics.VerbCreate)+counted(devmetrics.VerbUpdate)+counted(devmetrics.VerbPatch)).To(BeNumerically(">", 0),
		"devloop_api_requests_total of writes")
}

func unrelatedJob(ns, name string, labels map[string]string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}},
	}
}

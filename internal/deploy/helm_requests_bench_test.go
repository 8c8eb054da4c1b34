package deploy

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utilptr "k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/metrics"
	"github.com/devloop-dev/devloop/internal/testenv"
)

// BenchmarkHelmRequests counts the API requests the deploy engine makes
// for one Helm component (the controllers tests' web chart: a ConfigMap
// and a Deployment), as the operator impersonating the environment's
// deployer: a no-op (chart, values and images unchanged, past the drift
// quiet period: drift looked for, readiness read) and an upgrade (a value
// changed). Every request is counted by internal/metrics' transport
// wrapper, discovery included.
func BenchmarkHelmRequests(b *testing.B) {
	charts := testenv.FeatureCharts()
	ce := newCountedEngine(b, v1alpha1.Component{Name: "web", Helm: &v1alpha1.HelmSpec{
		Chart: v1alpha1.ChartRef{Source: "app", Path: "web"}}}, dirSource{charts})
	version := 0
	upgrade := func() metrics.Snapshot {
		version++
		ce.env.Spec.Components[0].Helm.Values = &apiextensionsv1.JSON{Raw: []byte(fmt.Sprintf(`{"version":"%d"}`, version))}
		_, reqs := ce.reconcile()
		return reqs
	}
	upgrade()
	markAvailable(b, ce.env.Namespace, "web")
	ce.reconcile() // the first check after the install
	var noop, upg metrics.Snapshot
	n := 0
	b.ResetTimer()
	for b.Loop() {
		n++
		res, reqs := ce.reconcile()
		if res.Phase != v1alpha1.PhaseReady {
			b.Fatalf("no-op: %s", res.Message)
		}
		noop = addSnapshots(noop, reqs)
		upg = addSnapshots(upg, upgrade())
		b.StopTimer()
		markAvailable(b, ce.env.Namespace, "web")
		ce.reconcile() // the first check after the upgrade
		b.StartTimer()
	}
	report := func(s metrics.Snapshot, what string) {
		b.ReportMetric(float64(s.Reads())/float64(n), what+"-reads/op")
		b.ReportMetric(float64(s.Writes())/float64(n), what+"-writes/op")
		b.ReportMetric(float64(s[metrics.VerbDryRun])/float64(n), what+"-dryruns/op")
	}
	report(noop, "noop")
	report(upg, "upgrade")
	b.Logf("requests of %d no-ops: %v; of %d upgrades: %v", n, noop, n, upg)
}

func addSnapshots(a, b metrics.Snapshot) metrics.Snapshot {
	out := metrics.Snapshot{}
	for k, v := range a {
		out[k] += v
	}
	for k, v := range b {
		out[k] += v
	}
	return out
}

// markAvailable plays the Deployment controller.
func markAvailable(t testing.TB, ns, name string) {
	t.Helper()
	ctx := context.Background()
	d := &appsv1.Deployment{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
		t.Fatal(err)
	}
	n := utilptr.Deref(d.Spec.Replicas, 1)
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
		},
	}
	if err := k8s.Status().Update(ctx, d); err != nil {
		t.Fatal(err)
	}
}

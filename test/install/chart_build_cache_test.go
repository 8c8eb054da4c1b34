package install

import (
	"context"
	"strings"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/internal/teamcache"
)

// With two replicas builders reach the leader only (the store is on its
// disk; a standby's port is closed): the chart's build cache Service
// selects no pod, the manager is told to point it at itself while it
// leads, and the chart's RBAC lets the manager's ServiceAccount do so —
// the leader's EndpointSlice is written as that ServiceAccount into the
// Service the chart made, on a real API server.
func TestChartBuildCacheServiceReachesTheLeaderOnly(t *testing.T) {
	ctx := context.Background()
	objs := renderChart(t, map[string]any{"replicaCount": 2})
	svc := find(t, objs, "Service", "devloop-build-cache")
	if sel, _, _ := unstructured.NestedMap(svc.Object, "spec", "selector"); len(sel) > 0 {
		t.Errorf("the build cache Service selects every replica (%v): builders routed to a standby find its port closed", sel)
	}
	args := containerNamed(t, deploymentOf(t, objs, "devloop-manager"), "manager").Args
	service := argValue(args, "--build-cache-service")
	if service != namespace+"/devloop-build-cache" {
		t.Fatalf("--build-cache-service=%q, want %s/devloop-build-cache", service, namespace)
	}

	ensureRestrictedNamespace(t, ctx, namespace)
	for _, o := range objs {
		if !strings.Contains(o.GetName(), "build-cache") || (o.GetKind() != "Service" && o.GetKind() != "Role" && o.GetKind() != "RoleBinding") {
			continue
		}
		obj := o.DeepCopy()
		if err := k8s.Patch(ctx, obj, client.Apply, client.FieldOwner("devloop-install-test"), client.ForceOwnership); err != nil {
			t.Fatalf("applying %s/%s: %v", o.GetKind(), o.GetName(), err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), obj) })
	}
	sa := "system:serviceaccount:" + namespace + ":devloop-manager"
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: sa, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	svcNS, svcName, _ := strings.Cut(service, "/")
	leader := teamcache.LeaderEndpoint{Client: cs, Service: types.NamespacedName{Namespace: svcNS, Name: svcName}, PodIP: "10.244.1.5", Port: 5003}
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- leader.Start(lctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the leader leaving: %v", err)
		}
	}()

	deadline := time.Now().Add(time.Minute)
	for {
		slices := &discoveryv1.EndpointSliceList{}
		if err := k8s.List(ctx, slices, client.InNamespace(svcNS), client.MatchingLabels{discoveryv1.LabelServiceName: svcName}); err != nil {
			t.Fatal(err)
		}
		if addressed(slices, "10.244.1.5", "build-cache") {
			return
		}
		select {
		case err := <-done:
			t.Fatalf("the leader, as %s, could not point the Service at itself: %v", sa, err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no EndpointSlice of Service %s names the leader 10.244.1.5 on port build-cache: %+v", service, slices.Items)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// addressed: one of slices names ip, ready, on the port named port.
func addressed(slices *discoveryv1.EndpointSliceList, ip, port string) bool {
	for _, s := range slices.Items {
		named := false
		for _, p := range s.Ports {
			named = named || (p.Name != nil && *p.Name == port)
		}
		for _, ep := range s.Endpoints {
			for _, a := range ep.Addresses {
				if a == ip && named && ep.Conditions.Ready != nil && *ep.Conditions.Ready {
					return true
				}
			}
		}
	}
	return false
}
